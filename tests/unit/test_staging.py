"""Staging a fetch (convert, transform, route, change kind): which records fail, which become changes."""

from __future__ import annotations

import json

from tabletopic.config.connector import parse_connector
from tabletopic.config.worker import parse_worker
from tabletopic.convert.records import DELETE, RawRecords
from tabletopic.staging import Staging

WORKER = parse_worker({"bootstrap.servers": "127.0.0.1:9",
                       "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                       "key.converter": "org.apache.kafka.connect.storage.StringConverter"})


def staging(**props: str) -> Staging:
    return Staging(parse_connector({"name": "s", "topics": "t", "iceberg.tables": "db.t",
                                    "value.converter.schemas.enable": "false", **props}, WORKER))


def raw(values: list[bytes | None], keys: list[bytes | None] | None = None) -> RawRecords:
    n = len(values)
    return RawRecords("t", 0, list(range(100, 100 + n)), [0] * n, keys or [None] * n, values, [[] for _ in values])


def test_a_value_over_the_size_bound_fails_unparsed_and_the_rest_go_on() -> None:
    staged = staging(**{"tabletopic.input.max-value-bytes": "1024"}).stage(
        raw([b'{"id": 1}', b'{"id": 2, "pad": "' + b"x" * 2000 + b'"}', b'{"id": 3}']))
    assert [(f.index, f.stage) for f in staged.failures] == [(1, "convert")]
    assert "tabletopic.input.max-value-bytes (1,024)" in staged.failures[0].reason
    assert sorted(int(r) for c in staged.changes["db.t"] for r in c.rows) == [0, 2]


def test_a_transform_that_raises_for_one_record_fails_that_record_alone() -> None:
    events = [{"op": "c", "after": {"id": i}, "before": None, "source": {"db": "d", "table": "t"}} for i in range(6)]
    events[3]["op"] = "x"  # an op Debezium never writes
    staged = staging(**{"transforms": "dbz",
                        "transforms.dbz.type": "org.apache.iceberg.connect.transforms.DebeziumTransform"}).stage(
        raw([json.dumps(e).encode() for e in events]))
    assert [(f.index, f.stage) for f in staged.failures] == [(3, "transform")]
    assert "unknown Debezium op" in staged.failures[0].reason
    assert sorted(int(r) for c in staged.changes["db.t"] for r in c.rows) == [0, 1, 2, 4, 5]


def test_a_debezium_fetch_of_deletes_only_is_deletes() -> None:
    deletes = [{"op": "d", "after": None, "before": {"id": i, "v": "x"}, "source": {"db": "d", "table": "t"}}
               for i in range(3)]
    staged = staging(**{"transforms": "dbz", "iceberg.tables.cdc-field": "_cdc.op",
                        "iceberg.tables.default-id-columns": "id",
                        "transforms.dbz.type": "org.apache.iceberg.connect.transforms.DebeziumTransform"}).stage(
        raw([json.dumps(e).encode() for e in deletes]))
    assert staged.failures == []
    (change,) = staged.changes["db.t"]
    assert change.value.column("id").to_pylist() == [0, 1, 2] and (change.op_array() == DELETE).all()


def test_json_null_is_a_tombstone_that_deletes_from_a_keyed_table_and_adds_nothing_to_an_append_one() -> None:
    values = [b'{"id": 1}', b" null "]
    append = staging().stage(raw(values))
    assert append.failures == [] and append.tombstones == [1]
    assert [int(r) for c in append.changes["db.t"] for r in c.rows] == [0]
    keyed = staging(**{"iceberg.tables.upsert-mode-enabled": "true", "iceberg.tables.default-id-columns": "id"})
    staged = keyed.stage(raw(values, keys=[b"1", b"7"]))
    deletes = [c for c in staged.changes["db.t"] if (c.op_array() == DELETE).all()]
    assert staged.failures == [] and [c.value.column("id").to_pylist() for c in deletes] == [["7"]]
