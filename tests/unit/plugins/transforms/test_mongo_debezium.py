"""The Iceberg sink's MongoDebeziumTransform, with its TestMongoDebeziumTransform cases as facts."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
import pytest

from tabletopic_plugins.transforms.mongo_debezium import parse_extended_json
from tests.unit.plugins.transforms.smt import batch, failed, keys, run, tombstones, values

MONGO = "org.apache.iceberg.connect.transforms.MongoDebeziumTransform"
AFTER = ('{"_id" : {"$numberLong" : "1004"},"first_name" : "Anne","last_name" : "Kretchmar",'
         '"email" : "annek@noanswer.org"}')
BEFORE = ('{"_id": {"$numberLong": "1004"},"first_name": "unknown","last_name": "Kretchmar",'
          '"email": "annek@noanswer.org"}')
ENVELOPE = pa.schema([("after", pa.string()), ("before", pa.string()),
                      ("updateDescription", pa.struct([("updatedFields", pa.string()),
                                                       ("removedFields", pa.list_(pa.string()))])),
                      ("op", pa.string()), ("ts_ms", pa.int64())])
KEY = pa.table({"id": pa.array([1004], pa.int64())})


def event(op: str, after: str | None, before: str | None, update: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"after": after, "before": before, "updateDescription": update, "op": op, "ts_ms": 5}


def test_a_create_gets_an_after_struct_and_the_key_its_bson_id() -> None:
    out = run(MONGO, {}, batch([event("c", AFTER, None)], schema=ENVELOPE, key=KEY))
    (row,) = values(out)
    assert row["after"] == {"_id": 1004, "first_name": "Anne", "last_name": "Kretchmar",
                            "email": "annek@noanswer.org"}
    assert "before" not in row and row["op"] == "c" and row["ts_ms"] == 5
    assert keys(out) == [{"id": 1004}] and out.batches[0].key.schema.field("id").type == pa.int32()
    assert out.batches[0].value.schema.field("after").type.field("_id").type == pa.int64()


def test_an_update_with_only_updated_fields_is_merged_over_before() -> None:
    update = {"updatedFields": '{"first_name": "Anne Marie"}', "removedFields": ["email"]}
    out = run(MONGO, {}, batch([event("u", None, BEFORE, update)], schema=ENVELOPE, key=KEY))
    (row,) = values(out)
    assert row["after"] == {"_id": 1004, "first_name": "Anne Marie", "last_name": "Kretchmar"}
    assert row["before"]["first_name"] == "unknown"


def test_malformed_and_foreign_records() -> None:
    assert "malformed record" in failed(run(MONGO, {}, batch([event("d", None, None)], schema=ENVELOPE,
                                                             key=KEY)))[0]
    out = run(MONGO, {}, batch([{"a": 1}], key=KEY))
    assert values(out) == [None] and keys(out) == [None]  # no envelope: a null key and value
    assert values(run(MONGO, {}, tombstones(1, key=KEY))) == [None]


@pytest.mark.parametrize(("text", "expected"), [
    ('{"a": {"$oid": "5d505646cf6d4fe581014ab2"}}', "5d505646cf6d4fe581014ab2"),
    ('{"a": {"$date": {"$numberLong": "1000"}}}', dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=dt.UTC)),
    ('{"a": {"$date": "1970-01-01T00:00:02Z"}}', dt.datetime(1970, 1, 1, 0, 0, 2, tzinfo=dt.UTC)),
    ('{"a": {"$numberDecimal": "1.50"}}', "1.50"),
    ('{"a": {"$binary": {"base64": "AQI=", "subType": "00"}}}', b"\x01\x02"),
    ('{"a": 5}', 5),
    ('{"a": 5000000000}', 5000000000),
    ('{"a": [1, 2]}', [1, 2]),
    ('{"a": {"b": true}}', {"b": True}),
    ('{"a": {"$regularExpression": {"pattern": "^a", "options": "i"}}}', {"regex": "^a", "options": "i"}),
])
def test_extended_json_values(text: str, expected: Any) -> None:
    from tabletopic_plugins.transforms.mongo_debezium import Bson, _Converter

    converter = _Converter(False)
    doc = parse_extended_json(text).value
    arrow = converter.document_type(doc)
    assert converter.value(Bson("DOCUMENT", doc), arrow) == {"a": expected}


def test_arrays_of_mixed_types_fail_and_document_mode_numbers_elements() -> None:
    from tabletopic_plugins.transforms.mongo_debezium import Bson, BsonError, _Converter

    with pytest.raises(BsonError, match="different Bson types"):
        _Converter(False).document_type(parse_extended_json('{"a": [1, "x"]}').value)
    converter = _Converter(True)
    doc = parse_extended_json('{"a": [1, "x"]}').value
    assert converter.value(Bson("DOCUMENT", doc), converter.document_type(doc)) == {"a": {"_0": 1, "_1": "x"}}
