"""Connect's JSON with schemas to Arrow columns: each of Connect's logical types, nesting and nulls, with no broker."""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa

from tabletopic_plugins.converters.json_converter import JsonConverter
from tests.connect_json import ENVELOPE_SCHEMA, json_envelope, typed_row


def _convert(values: list[bytes]) -> tuple[pa.Table, list]:
    converter = JsonConverter()
    converter.configure({"schemas.enable": "true"}, is_key=False)
    result = converter.convert("t", values)
    return pa.concat_tables([p.table for p in result.parts]), result.failures


def test_connect_logical_types_get_their_arrow_types() -> None:
    table, failures = _convert([json_envelope(ENVELOPE_SCHEMA, typed_row(i)) for i in range(3)])
    assert failures == []
    types = {f.name: f.type for f in table.schema}
    assert types["id"] == pa.int64() and table.schema.field("id").nullable is False
    # Time is microseconds since midnight in a long, as Iceberg's sinks keep it (Spark has no time type).
    assert types["day"] == pa.date32() and types["at"] == pa.int64()
    assert pa.types.is_timestamp(types["ts"]) and types["price"] == pa.decimal128(10, 2)
    assert types["blob"] == pa.binary() and types["tags"] == pa.list_(pa.string())
    assert types["attrs"] == pa.map_(pa.string(), pa.int32()) and pa.types.is_struct(types["who"])


def test_values_and_nulls_land_as_written() -> None:
    table, _ = _convert([json_envelope(ENVELOPE_SCHEMA, typed_row(3)),
                         json_envelope(ENVELOPE_SCHEMA, typed_row(99, empty=True))])
    three, empty = table.to_pylist()
    assert three["day"] == dt.date(1970, 1, 1) + dt.timedelta(days=19_003)
    assert three["at"] == (3_600_000 + 3) * 1000
    assert three["price"] == decimal.Decimal("123.48") and three["blob"] == bytes([3, 255])
    assert three["tags"] == ["t3", "x"] and three["attrs"] == [("k", 3)]
    assert three["who"] == {"name": "n3", "score": 1.5}
    assert all(v is None for k, v in empty.items() if k != "id")


def test_a_value_outside_the_envelope_fails_alone_and_a_null_payload_is_a_tombstone() -> None:
    converter = JsonConverter()
    converter.configure({"schemas.enable": "true"}, is_key=False)
    good = json_envelope(ENVELOPE_SCHEMA, typed_row(1))
    result = converter.convert("t", [b'{"id": 1}', good, b'{"schema": null, "payload": null}'])
    assert [f.index for f in result.failures] == [0]
    assert result.nulls == [2] and sum(len(p.table) for p in result.parts) == 1
