"""Debezium's ExtractNewRecordState, with its ExtractNewRecordStateTest cases as facts."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from tests.unit.plugins.transforms.smt import batch, failed, run, tombstones, topics, values

ENRS = "io.debezium.transforms.ExtractNewRecordState"
ROW = pa.struct([("id", pa.int8()), ("name", pa.string())])
SOURCE = pa.struct([("lsn", pa.int32()), ("version", pa.string()), ("table", pa.string())])
TRANSACTION = pa.struct([("id", pa.string()), ("total_order", pa.int64()), ("data_collection_order", pa.int64())])
ENVELOPE = pa.schema([("before", ROW), ("after", ROW), ("source", SOURCE), ("transaction", TRANSACTION),
                      ("op", pa.string()), ("ts_ms", pa.int64())])
SOURCE_ROW = {"lsn": 1234, "version": "version!", "table": "customers"}


def event(op: str, before: dict[str, Any] | None, after: dict[str, Any] | None,
          transaction: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"before": before, "after": after, "source": SOURCE_ROW, "transaction": transaction, "op": op,
            "ts_ms": 12836}


CREATE = event("c", None, {"id": 1, "name": "a"})
UPDATE = event("u", {"id": 1, "name": "a"}, {"id": 1, "name": "b"},
               {"id": "571", "total_order": 42, "data_collection_order": 42})
DELETE = event("d", {"id": 1, "name": "b"}, None)
TRUNCATE = event("t", None, None)


def envelope(*events: dict[str, Any], **kw: Any) -> Any:
    return batch(list(events), schema=ENVELOPE, **kw)


# (mode, what a create, a delete and a tombstone become; None: dropped, "null": a tombstone)
MODES = [
    ({}, {"id": 1, "name": "a"}, "null", None),  # tombstone, Debezium 3's default
    ({"delete.tombstone.handling.mode": "tombstone"}, {"id": 1, "name": "a"}, "null", None),
    ({"delete.tombstone.handling.mode": "drop"}, {"id": 1, "name": "a"}, None, None),
    ({"delete.tombstone.handling.mode": "rewrite"}, {"id": 1, "name": "a", "__deleted": "false"},
     {"id": 1, "name": "b", "__deleted": "true"}, None),
    ({"delete.tombstone.handling.mode": "rewrite-with-tombstone"}, {"id": 1, "name": "a", "__deleted": "false"},
     {"id": 1, "name": "b", "__deleted": "true"}, "null"),
    ({"delete.tombstone.handling.mode": "delete-to-tombstone"}, {"id": 1, "name": "a"}, "null", None),
    ({"delete.handling.mode": "drop"}, {"id": 1, "name": "a"}, None, None),  # the settings before Debezium 3.2
    ({"delete.handling.mode": "none"}, {"id": 1, "name": "a"}, "null", None),
    ({"delete.handling.mode": "rewrite", "drop.tombstones": "false"}, {"id": 1, "name": "a", "__deleted": "false"},
     {"id": 1, "name": "b", "__deleted": "true"}, "null"),
    ({"drop.tombstones": "false"}, {"id": 1, "name": "a"}, None, "null"),
]


@pytest.mark.parametrize(("props", "created", "deleted", "tombstone"), MODES)
def test_delete_and_tombstone_handling(props: dict[str, str], created: Any, deleted: Any, tombstone: Any) -> None:
    assert values(run(ENRS, props, envelope(CREATE))) == [created]
    out = run(ENRS, props, envelope(DELETE))
    assert values(out) == ([] if deleted is None else [None] if deleted == "null" else [deleted])
    out = run(ENRS, props, tombstones(1))
    assert values(out) == ([] if tombstone is None else [None])


def test_a_truncate_is_dropped_and_what_is_no_envelope_passes() -> None:
    assert values(run(ENRS, {}, envelope(TRUNCATE))) == []
    assert values(run(ENRS, {}, batch([{"id": 1}]))) == [{"id": 1}]
    assert values(run(ENRS, {}, batch([CREATE], schemaless=True))) == [CREATE]  # Debezium reads only schemas


def test_add_fields_named_and_prefixed() -> None:
    out = run(ENRS, {"add.fields": "op , lsn,id", "add.fields.prefix": "prefix."}, envelope(UPDATE))
    assert values(out) == [{"id": 1, "name": "b", "prefix.op": "u", "prefix.lsn": 1234, "prefix.id": "571"}]
    props = {"add.fields": "op:OP, lsn:LSN, id:ID, source.lsn:source_lsn, transaction.total_order:TOTAL_ORDER",
             "add.fields.prefix": ""}
    assert values(run(ENRS, props, envelope(UPDATE))) == [
        {"id": 1, "name": "b", "OP": "u", "LSN": 1234, "ID": "571", "source_lsn": 1234, "TOTAL_ORDER": 42}]
    assert values(run(ENRS, {"add.fields": "op,lsn,id"}, envelope(CREATE))) == [
        {"id": 1, "name": "a", "__op": "c", "__lsn": 1234, "__id": None}]
    # source has no ts_ms: Debezium then takes the envelope's; a field in neither is not added.
    assert values(run(ENRS, {"add.fields": "ts_ms,source.ts_ms,notThere"}, envelope(CREATE))) == [
        {"id": 1, "name": "a", "__ts_ms": 12836, "__source_ts_ms": 12836}]


def test_a_rewritten_delete_gets_the_fields_and_a_tombstone_only_the_op_header() -> None:
    props = {"delete.tombstone.handling.mode": "rewrite-with-tombstone", "add.fields": "op,lsn",
             "add.headers": "op,source.lsn"}
    out = run(ENRS, props, envelope(DELETE))
    assert values(out) == [{"id": 1, "name": "b", "__deleted": "true", "__op": "d", "__lsn": 1234}]
    assert out.batches[0].headers == [[("__op", "d"), ("__source_lsn", 1234)]]
    out = run(ENRS, props, tombstones(1))
    assert out.batches[0].headers == [[("__op", "d")]]


def test_route_by_field_renames_the_topic_from_the_row() -> None:
    props = {"route.by.field": "name"}
    assert topics(run(ENRS, props, envelope(CREATE, event("c", None, {"id": 2, "name": None})))) == ["a", "orders"]
    assert topics(run(ENRS, props, envelope(DELETE))) == ["b"]  # a delete's from its before image
    assert "is not of type STRING" in failed(run(ENRS, {"route.by.field": "id"}, envelope(CREATE)))[0]


def test_settings_refused() -> None:
    from tabletopic.config.connector_keys import TRANSFORM_GROUP
    from tabletopic.config.plugin_names import available_plugins

    plugin = available_plugins(TRANSFORM_GROUP)[ENRS].load()
    for props, error in (({"delete.tombstone.handling.mode": "bogus"}, "must be one of"),
                         ({"delete.handling.mode": "bogus"}, "must be one of"),
                         ({"drop.fields.header.name": "h"}, "not supported")):
        with pytest.raises(ValueError, match=error):
            plugin().configure(props)
