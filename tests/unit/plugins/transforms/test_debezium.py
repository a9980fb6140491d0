"""The Iceberg sink's DebeziumTransform, with its TestDebeziumTransform cases as facts."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
import pytest

from tests.unit.plugins.transforms.smt import batch, failed, run, tombstones, values

DBZ = "org.apache.iceberg.connect.transforms.DebeziumTransform"
SOURCE = {"db": "db", "schema": "schema", "table": "tbl"}
ROW = {"account_id": 1, "balance": 100, "last_updated": "2024-01-01T00:00:00Z"}


def event(op: str, before: dict[str, Any] | None = ROW, after: dict[str, Any] | None = ROW,
          source: dict[str, str] = SOURCE) -> dict[str, Any]:
    return {"op": op, "ts_ms": 1_700_000_000_000, "source": source, "before": before, "after": after}


@pytest.mark.parametrize("schemaless", [False, True])
def test_the_after_image_with_cdc_metadata_schema_before_db(schemaless: bool) -> None:
    key = pa.table({"account_id": [1]})
    out = run(DBZ, {"cdc.target.pattern": "{db}_x.{table}_x"}, batch([event("u")], key=key, schemaless=schemaless))
    (row,) = values(out)
    cdc = row.pop("_cdc")
    assert row == ROW
    ts = 1_700_000_000_000 if schemaless else dt.datetime.fromtimestamp(1_700_000_000, dt.UTC)
    assert cdc == {"op": "U", "ts": ts, "offset": 100, "source": "schema.tbl", "target": "schema_x.tbl_x",
                   "key": {"account_id": 1}}


@pytest.mark.parametrize(("op", "kind"), [("c", "I"), ("r", "I"), ("u", "U"), ("d", "D"), ("t", "I"), ("x", "I")])
def test_op_mapping(op: str, kind: str) -> None:
    out = run(DBZ, {}, batch([event(op)]))
    assert values(out)[0]["_cdc"]["op"] == kind


def test_a_delete_takes_the_before_image_and_db_stands_in_without_schema() -> None:
    out = run(DBZ, {}, batch([event("d", after=None, source={"db": "shop", "table": "t"})]))
    (row,) = values(out)
    assert row["account_id"] == 1 and row["_cdc"]["source"] == "shop.t" and row["_cdc"]["target"] == "shop.t"
    assert "key" not in row["_cdc"]


def test_an_event_without_its_image_fails_with_a_schema_and_is_dropped_without() -> None:
    events = [event("c"), event("d", before=None, after=None)]
    assert list(failed(run(DBZ, {}, batch(events)))) == [1]
    out = run(DBZ, {}, batch(events, schemaless=True))
    assert out.failures == [] and len(values(out)) == 1


def test_a_schemaless_event_with_only_the_wrong_image_fails_rather_than_vanish() -> None:
    events = [event("c"), event("c", after=None), event("t", before=None, after=None)]
    out = run(DBZ, {}, batch(events, schemaless=True))
    assert list(failed(out)) == [1] and len(values(out)) == 1


def test_a_null_op_fails_its_record_and_a_tombstone_passes() -> None:
    out = run(DBZ, {}, batch([event("c"), {**event("c"), "op": None}]))
    assert failed(out) == {1: "transform 't': a Debezium event's op is null"}
    assert values(run(DBZ, {}, tombstones(1))) == [None]
