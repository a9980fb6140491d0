"""Connect transforms end to end: through the broker into tables read by Spark and DuckDB.

Debezium's ExtractNewRecordState into an upsert table and into a CDC table; RegexRouter with
InsertField$Value feeding dynamic routing across a SIGKILL; a chain whose transforms apply where their
predicates say.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tabletopic.route.router import topic_table
from tabletopic.write.spark_session import SparkRuntime
from tests.debezium_source import COLUMNS, Source
from tests.support import (
    DaemonProcess,
    Warehouse,
    connector_props,
    create_topic,
    duckdb_connection,
    produce,
    run_in_process,
    unique,
    wait_until,
    worker_props,
)


def customers_history() -> Source:
    """Inserts (a snapshot and new rows), updates, deletes each followed by Debezium's tombstone, a row
    deleted and made again, and a row that lives and dies in the stream."""
    db = Source()
    for i in range(1, 31):
        db.emit("customers", "r", {"id": i, "name": f"customer {i}", "email": f"c{i}@example.com"})
    for i in range(1, 31, 3):
        db.emit("customers", "u", {"id": i, "name": f"customer {i} (renamed)", "email": None})
    for i in range(2, 31, 5):
        db.emit("customers", "d", ident=i)
    db.emit("customers", "c", {"id": 7, "name": "back again", "email": "b@example.com"})
    db.emit("customers", "c", {"id": 99, "name": "short-lived", "email": None})
    db.emit("customers", "d", ident=99)
    db.emit("customers", "d", ident=7)
    db.emit("customers", "c", {"id": 7, "name": "back once more", "email": None})
    return db


@pytest.mark.parametrize("mode", ["upsert", "cdc"])
def test_extract_new_record_state_into_a_keyed_table_leaves_the_source_rows(bootstrap: str, spark: SparkRuntime,
                                                                            warehouse: Warehouse, mode: str) -> None:
    """upsert: Debezium's default delete handling makes each delete a tombstone, which deletes its key from an
    upsert table (Debezium's own tombstones are dropped). cdc: deletes are rewritten as rows with
    ``__deleted``, and ``add.fields=op`` gives every row ``__op``, the table's cdc-field."""
    db = customers_history()
    topic, table = unique("dbserver1.inventory.customers"), f"enrs.customers_{mode}"
    create_topic(bootstrap, topic, 1)
    produce(bootstrap, topic, db.events["customers"])
    unwrap = {"transforms": "unwrap", "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState"}
    if mode == "upsert":
        keyed = {"iceberg.tables.upsert-mode-enabled": "true"}
    else:
        keyed = {"iceberg.tables.cdc-field": "__op", "transforms.unwrap.add.fields": "op",
                 "transforms.unwrap.delete.tombstone.handling.mode": "rewrite"}
    connector = connector_props("enrs", topic, table, warehouse, {
        "key.converter": "org.apache.kafka.connect.json.JsonConverter", "key.converter.schemas.enable": "true",
        "value.converter.schemas.enable": "true", "iceberg.tables.default-id-columns": "id",
        "iceberg.tables.auto-create-enabled": "true", "iceberg.control.commit.interval-ms": "1000",
        **unwrap, **keyed})
    total = len(db.events["customers"])
    group = f"connect-{connector['name']}"
    code, _ = run_in_process(spark, worker_props(bootstrap), [connector], timeout=180,
                             until=lambda _: sum(warehouse.offsets(table, group).values()) >= total)
    assert code == 0
    columns = [c["field"] for c in COLUMNS["customers"]]
    wanted = db.rows["customers"]
    got = {r.id: {c: getattr(r, c) for c in columns} for r in warehouse.rows(table, ", ".join(columns))}
    assert got == wanted
    duck = duckdb_connection().execute(
        f"SELECT {', '.join(columns)} FROM iceberg_scan('{warehouse.location(table)}')").fetchall()
    assert {r[0]: dict(zip(columns, r, strict=True)) for r in duck} == wanted
    if mode == "cdc":
        extra = warehouse.sql(f"SELECT DISTINCT __op, __deleted FROM {{c}}.{table}")
        assert {tuple(r) for r in extra} <= {("r", "false"), ("c", "false"), ("u", "false")}
    warehouse.assert_intact(table)


def test_regex_router_and_insert_field_route_two_topics_into_one_table_exactly_across_a_sigkill(
        bootstrap: str, warehouse: Warehouse, tmp_path: Path) -> None:
    """Two versions of one topic are renamed to the table's name by RegexRouter; InsertField$Value writes that
    name into ``_route``, which dynamic routing reads. The daemon is killed after its first commits and
    started again: every record is in the table once, and the snapshot records the source topics."""
    stem = unique("shop")
    topics, table = [f"{stem}-orders-v1", f"{stem}-orders-v2"], f"routed.{stem}_orders"
    for topic in topics:
        create_topic(bootstrap, topic, 2)

    def send(first: int, last: int) -> None:
        for topic in topics:
            produce(bootstrap, topic, [(str(i).encode(), json.dumps({"id": i, "topic": topic}).encode(), i % 2)
                                       for i in range(first, last)])

    connector = connector_props("router", ",".join(topics), None, warehouse, {
        "value.converter.schemas.enable": "false", "iceberg.tables.auto-create-enabled": "true",
        "iceberg.tables.dynamic-enabled": "true", "iceberg.tables.route-field": "_route",
        "iceberg.control.commit.interval-ms": "1000", "transforms": "rename,insert",
        "transforms.rename.type": "RegexRouter", "transforms.rename.regex": r"(.*)-orders-v\d",
        "transforms.rename.replacement": "routed.$1_orders",
        "transforms.insert.type": "org.apache.kafka.connect.transforms.InsertField$Value",
        "transforms.insert.topic.field": "_route"})
    group = f"connect-{connector['name']}"
    daemon = DaemonProcess(tmp_path, worker_props(bootstrap), [connector]).start()
    send(0, 200)
    wait_until(lambda: sum(warehouse.offsets(table, group).values()) > 0, 180, "a first commit", daemon)
    daemon.kill()
    send(200, 400)
    daemon.start()
    wait_until(lambda: sum(warehouse.offsets(table, group).values()) >= 800, 180, "every record", daemon)
    assert daemon.terminate() == 0
    rows = warehouse.sql(f"SELECT topic, id, _route FROM {{c}}.{table}")
    assert sorted((r[0], int(r[1])) for r in rows) == sorted((t, i) for t in topics for i in range(400))
    assert {r[2] for r in rows} == {table}
    assert set(warehouse.offsets(table, group)) == {(t, p) for t in topics for p in (0, 1)}
    assert sum(warehouse.offsets(table, group).values()) == 800
    warehouse.assert_intact(table)


def test_transforms_change_only_the_records_their_predicates_match(bootstrap: str, spark: SparkRuntime,
                                                                   warehouse: Warehouse) -> None:
    """Table Topic mode, two topics, upsert tables keyed on id. ValueToKey applies where RecordIsTombstone does
    not (negated: Connect's ValueToKey fails a tombstone); TimestampConverter only where TopicNameMatches does
    not match the raw topic (negated); Filter drops the tombstones, so the rows they would delete stay."""
    stem = unique("pred")
    events, raw = f"{stem}_events", f"{stem}_raw"
    namespace = "tt_pred"
    for topic in (events, raw):
        create_topic(bootstrap, topic, 1)
        produce(bootstrap, topic, [(str(i).encode(), json.dumps({"id": i, "ts": 1_700_000_000_000 + i}).encode(), 0)
                                   for i in range(5)] + [(b"1", None, 0)])
    connector = connector_props("pred", f"{events},{raw}", None, warehouse, {
        "value.converter.schemas.enable": "false", "tabletopic.table-topic.enabled": "true",
        "tabletopic.table-topic.namespace": namespace, "iceberg.tables.upsert-mode-enabled": "true",
        "iceberg.tables.default-id-columns": "id", "iceberg.control.commit.interval-ms": "1000",
        "transforms": "key,time,drop", "predicates": "tombstone,rawTopic",
        "predicates.tombstone.type": "RecordIsTombstone",
        "predicates.rawTopic.type": "TopicNameMatches", "predicates.rawTopic.pattern": ".*_raw",
        "transforms.key.type": "ValueToKey", "transforms.key.fields": "id",
        "transforms.key.predicate": "tombstone", "transforms.key.negate": "true",
        "transforms.time.type": "org.apache.kafka.connect.transforms.TimestampConverter$Value",
        "transforms.time.field": "ts", "transforms.time.target.type": "Timestamp",
        "transforms.time.predicate": "rawTopic", "transforms.time.negate": "true",
        "transforms.drop.type": "Filter", "transforms.drop.predicate": "tombstone"})
    tables = [topic_table(namespace, events), topic_table(namespace, raw)]
    group = f"connect-{connector['name']}"
    code, _ = run_in_process(spark, worker_props(bootstrap), [connector], timeout=180, until=lambda _: all(
        sum(warehouse.offsets(t, group).values()) >= 6 for t in tables))
    assert code == 0
    converted = warehouse.sql(f"SELECT id, unix_millis(ts) FROM {{c}}.{tables[0]}")
    assert sorted((int(r[0]), int(r[1])) for r in converted) == [(i, 1_700_000_000_000 + i) for i in range(5)]
    kept = warehouse.sql(f"SELECT id, ts FROM {{c}}.{tables[1]}")
    assert sorted((int(r[0]), int(r[1])) for r in kept) == [(i, 1_700_000_000_000 + i) for i in range(5)]
    assert warehouse.table(tables[0]).schema().findField("ts").type().toString() == "timestamptz"
    assert warehouse.table(tables[1]).schema().findField("ts").type().toString() == "long"
    for table in tables:
        warehouse.assert_intact(table)
