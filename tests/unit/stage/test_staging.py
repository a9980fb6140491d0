"""Staging a fetch (convert, transform, route, change kind): which records fail, which become changes."""

from __future__ import annotations

import json

from tabletopic.config.connector import parse_connector
from tabletopic.config.worker import parse_worker
from tabletopic.convert.records import DELETE, RawRecords
from tabletopic.stage.staging import Staging, StagingSettings

WORKER = parse_worker({"bootstrap.servers": "127.0.0.1:9",
                       "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                       "key.converter": "org.apache.kafka.connect.storage.StringConverter"})
CATALOG = {"iceberg.catalog.type": "hadoop", "iceberg.catalog.warehouse": "file:///tmp/warehouse"}


def staging(**props: str) -> Staging:
    return Staging(StagingSettings.of(parse_connector({"name": "s", "topics": "t", "iceberg.tables": "db.t", **CATALOG,
                                                       "value.converter.schemas.enable": "false", **props}, WORKER)))


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
    events[3]["op"] = None  # the Iceberg sink's transform fails it (a NullPointerException there)
    staged = staging(**{"transforms": "dbz",
                        "transforms.dbz.type": "org.apache.iceberg.connect.transforms.DebeziumTransform"}).stage(
        raw([json.dumps(e).encode() for e in events]))
    assert [(f.index, f.stage) for f in staged.failures] == [(3, "transform")]
    assert "op is null" in staged.failures[0].reason
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
    # A plain key is one column here; the writer names it after the table's one id column.
    assert staged.failures == [] and [c.value.column(0).to_pylist() for c in deletes] == [["7"]]


def test_transforms_see_keys_and_headers_only_when_one_needs_them_and_tombstones_pass_those_that_take_none() -> None:
    values = [b'{"id": 1, "ts": 0}', None]
    plain = staging(**{"transforms": "ts",
                       "transforms.ts.type": "org.apache.kafka.connect.transforms.TimestampConverter$Value",
                       "transforms.ts.field": "ts", "transforms.ts.target.type": "Timestamp",
                       "iceberg.tables.upsert-mode-enabled": "true", "iceberg.tables.default-id-columns": "id"})
    assert not plain.transforms.needs_key and not plain.transforms.needs_headers
    staged = plain.stage(raw(values, keys=[b"1", b"1"]))
    assert staged.failures == []
    kinds = sorted((int(c.rows[0]), bool((c.op_array() == DELETE).all())) for c in staged.changes["db.t"])
    assert kinds == [(0, False), (1, True)]  # the tombstone passed the transform and deletes by its key


def test_a_predicate_on_headers_and_a_key_transform_get_what_they_need() -> None:
    st = staging(**{"transforms": "drop,key", "predicates": "marked",
                    "transforms.drop.type": "org.apache.kafka.connect.transforms.Filter",
                    "transforms.drop.predicate": "marked",
                    "transforms.key.type": "org.apache.kafka.connect.transforms.HoistField$Key",
                    "transforms.key.field": "k",
                    "predicates.marked.type": "HasHeaderKey", "predicates.marked.name": "skip"})
    assert st.transforms.needs_key and st.transforms.needs_headers
    batch = raw([b'{"id": 1}', b'{"id": 2}'], keys=[b"a", b"b"])
    batch.headers[1] = [("skip", b"")]
    staged = st.stage(batch)
    (change,) = staged.changes["db.t"]
    assert staged.failures == [] and change.rows.tolist() == [0] and change.key.to_pylist() == [{"k": "a"}]


def test_a_topic_rewriting_transform_keeps_the_source_offsets() -> None:
    st = staging(**{"transforms": "route,tag", "transforms.route.type": "RegexRouter",
                    "transforms.route.regex": "t", "transforms.route.replacement": "db.renamed",
                    "transforms.tag.type": "org.apache.kafka.connect.transforms.InsertField$Value",
                    "transforms.tag.topic.field": "dest"})
    (change,) = st.stage(raw([b'{"id": 1}'])).changes["db.t"]
    assert change.topic == "t" and change.offsets.tolist() == [100]
    assert change.value.column("dest").to_pylist() == ["db.renamed"]


def test_records_a_transform_makes_null_delete_by_the_keys_they_came_with() -> None:
    st = staging(**{"transforms": "x", "transforms.x.type": "org.apache.kafka.connect.transforms.ExtractField$Value",
                    "transforms.x.field": "after", "iceberg.tables.upsert-mode-enabled": "true",
                    "iceberg.tables.default-id-columns": "id"})
    assert not st.transforms.needs_key  # the keys are converted only for the records that need them
    staged = st.stage(raw([b'{"after": {"id": 1}}', b'{"after": null}'], keys=[b"1", b"2"]))
    assert staged.failures == []
    deletes = [c for c in staged.changes["db.t"] if (c.op_array() == DELETE).all()]
    assert [c.value.column(0).to_pylist() for c in deletes] == [["2"]]
