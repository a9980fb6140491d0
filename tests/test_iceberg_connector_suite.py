"""The Apache Iceberg Kafka Connect sink's own integration tests, run here as a user would run them.

``TestIntegration``, ``TestIntegrationMultiTable`` and ``TestIntegrationDynamicTable`` of apache/iceberg
(``kafka-connect/kafka-connect-runtime/src/integration``): their connector keys, their tables made as they
make them (``TestEvent.TEST_SCHEMA``: id long as the identifier field, type, ts timestamptz, payload;
``TEST_SPEC``: day(ts)), their records (Connect's JSON converter, with the envelope or without, where a
``Timestamp`` is epoch milliseconds), and what they assert: one snapshot, the files it added and each
one's record count, the snapshot's summary keys, the columns' types and the spec. The rows are read by
Spark, and by DuckDB where the commits go to main. Beside them, Tabular's CDC and upsert cases, on tables
whose identifier fields name the key (no id columns set).
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from typing import Any

import pytest

from tabletopic.write.spark_session import SparkRuntime
from tests.support import (
    Warehouse,
    create_topic,
    duckdb_connection,
    produce,
    run_in_process,
    unique,
    worker_props,
)

DB = "test"
NOW_MS = int(time.time() * 1000)
DAY_MS = 86_400_000
TEST_SCHEMA_SQL = "(id bigint NOT NULL, type string NOT NULL, ts timestamp NOT NULL, payload string NOT NULL)"
# TestEvent.TEST_CONNECT_SCHEMA, as Connect's JsonConverter writes it in an envelope
CONNECT_SCHEMA = {"type": "struct", "optional": False, "fields": [
    {"field": "id", "type": "int64", "optional": False},
    {"field": "type", "type": "string", "optional": False},
    {"field": "ts", "type": "int64", "optional": False, "name": "org.apache.kafka.connect.data.Timestamp",
     "version": 1},
    {"field": "payload", "type": "string", "optional": False},
    {"field": "op", "type": "string", "optional": True}]}


def event(id_: int, type_: str, ts_ms: int, payload: str, use_schema: bool, op: str | None = None) -> bytes:
    """``TestEvent.serialize``: with the envelope, or without it (a Timestamp is then its epoch milliseconds,
    and a null op stays null)."""
    value = {"id": id_, "type": type_, "ts": ts_ms, "payload": payload, "op": op}
    doc = {"schema": CONNECT_SCHEMA, "payload": value} if use_schema else value
    return json.dumps(doc).encode()


def send(bootstrap: str, topic: str, events: list[tuple[int, bytes]]) -> None:
    produce(bootstrap, topic, [(str(id_).encode(), value, 0) for id_, value in events])


def common_config(topic: str, warehouse: Warehouse, use_schema: bool, branch: str | None) -> dict[str, Any]:
    """``IntegrationTestBase.createCommonConfig`` and ``runTest``'s keys, as they are."""
    config = {
        "name": unique("it"), "topics": topic,
        "connector.class": "org.apache.iceberg.connect.IcebergSinkConnector",
        "tasks.max": "2",
        "consumer.override.auto.offset.reset": "earliest",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable": "false",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": str(use_schema).lower(),
        "iceberg.control.commit.interval-ms": "1000",
        "iceberg.control.commit.timeout-ms": str(2**31 - 1),
        "iceberg.kafka.auto.offset.reset": "earliest",
        **warehouse.connector_props(),
    }
    if branch is not None:
        config["iceberg.tables.default-commit-branch"] = branch
    return config


def create_test_table(warehouse: Warehouse, name: str, partitioned: bool) -> None:
    warehouse.sql(f"CREATE NAMESPACE IF NOT EXISTS {{c}}.{DB}")
    spec = " PARTITIONED BY (days(ts))" if partitioned else ""
    warehouse.sql(f"CREATE TABLE {{c}}.{name} {TEST_SCHEMA_SQL} USING iceberg{spec}")
    warehouse.sql(f"ALTER TABLE {{c}}.{name} SET IDENTIFIER FIELDS id")


def run(spark: SparkRuntime, bootstrap: str, config: dict[str, Any], warehouse: Warehouse,
        tables: list[str]) -> None:
    """``runTest``: until each table has a snapshot (asserted to be its only one, as ``assertSnapshotAdded``)."""
    def snapshotted(_: Any) -> bool:
        return all(warehouse.exists(t) and len(list(warehouse.table(t).snapshots())) >= 1 for t in tables)

    code, _ = run_in_process(spark, worker_props(bootstrap), [config], until=snapshotted, timeout=90)
    assert code == 0
    for table in tables:
        assert len(list(warehouse.table(table).snapshots())) == 1, table


def head(warehouse: Warehouse, table: str, branch: str | None) -> Any:
    t = warehouse.table(table)
    t.refresh()
    return t.currentSnapshot() if branch is None else t.snapshot(branch)


def added_files(warehouse: Warehouse, table: str, branch: str | None) -> list[Any]:
    t = warehouse.table(table)
    return list(head(warehouse, table, branch).addedDataFiles(t.io()))


def assert_snapshot_props(warehouse: Warehouse, table: str, branch: str | None, group: str) -> None:
    """``assertSnapshotProps``: the offsets, the commit id and the task id; and the valid-through time."""
    summary = head(warehouse, table, branch).summary()
    keys = set(summary.keySet())
    assert f"kafka.connect.source-offsets.{group}" in keys, keys
    assert {"kafka.connect.commit-id", "kafka.connect.task-id", "kafka.connect.valid-through-ts"} <= keys, keys
    # The oldest of each partition's newest record (here one partition): an OffsetDateTime, as Java prints it.
    datetime.fromisoformat(summary.get("kafka.connect.valid-through-ts").replace("Z", "+00:00"))


def assert_one_row_each(warehouse: Warehouse, ids: dict[str, int], branch: str | None,
                        config: dict[str, Any]) -> None:
    """The multi-table tests' checks: each table's commit added one file of one row, the row with its id."""
    for table, id_ in ids.items():
        files = added_files(warehouse, table, branch)
        assert len(files) == 1 and int(files[0].recordCount()) == 1
        assert_snapshot_props(warehouse, table, branch, f"connect-{config['name']}")
        assert [r[0] for r in rows(warehouse, table, branch)] == [id_]


def column_type(warehouse: Warehouse, table: str, column: str) -> str | None:
    field = warehouse.table(table).schema().findField(column)
    return None if field is None else str(field.type().toString())


def rows(warehouse: Warehouse, table: str, branch: str | None) -> list[tuple[Any, ...]]:
    at = "" if branch is None else f" VERSION AS OF '{branch}'"
    return sorted(tuple(r) for r in warehouse.sql(f"SELECT id, type, ts, payload FROM {{c}}.{table}{at}"))


def duck_rows(warehouse: Warehouse, table: str) -> list[tuple[Any, ...]]:
    found = duckdb_connection().execute(
        f"SELECT id, type, epoch_ms(ts), payload FROM iceberg_scan('{warehouse.location(table)}')").fetchall()
    return sorted(found)


def utc(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).replace(tzinfo=None)


VARIANTS = [pytest.param(True, None, id="schema-main"), pytest.param(False, "test_branch", id="schemaless-branch"),
            pytest.param(False, None, id="schemaless-main")]


@pytest.mark.parametrize(("use_schema", "branch"), VARIANTS)
def test_partitioned_table(bootstrap: str, spark: SparkRuntime, warehouse: Warehouse, use_schema: bool,
                           branch: str | None) -> None:
    """``testIcebergSinkPartitionedTable``: two events three days apart land in two day partitions, one
    record each: epoch milliseconds are milliseconds, with a schema or without."""
    topic, table = unique("it_part"), f"{DB}.foobar_{unique('p')}"
    create_topic(bootstrap, topic, 1)
    create_test_table(warehouse, table, partitioned=True)
    three_days_ago = NOW_MS - 3 * DAY_MS
    send(bootstrap, topic, [(1, event(1, "type1", NOW_MS, "hello world!", use_schema)),
                            (2, event(2, "type2", three_days_ago, "having fun?", use_schema))])
    config = {**common_config(topic, warehouse, use_schema, branch), "iceberg.tables": table}
    run(spark, bootstrap, config, warehouse, [table])

    files = added_files(warehouse, table, branch)
    assert len(files) == 2 and [int(f.recordCount()) for f in files] == [1, 1]
    days = sorted(int(f.partition().get(0, spark.jvm.java.lang.Integer._java_lang_class)) for f in files)
    assert days == [three_days_ago // DAY_MS, NOW_MS // DAY_MS]
    assert_snapshot_props(warehouse, table, branch, f"connect-{config['name']}")
    expected = [(1, "type1", utc(NOW_MS), "hello world!"), (2, "type2", utc(three_days_ago), "having fun?")]
    assert rows(warehouse, table, branch) == expected
    if branch is None:
        assert duck_rows(warehouse, table) == [(1, "type1", NOW_MS, "hello world!"),
                                               (2, "type2", three_days_ago, "having fun?")]
        warehouse.assert_intact(table)


@pytest.mark.parametrize(("use_schema", "branch"), VARIANTS[:2])
def test_unpartitioned_table(bootstrap: str, spark: SparkRuntime, warehouse: Warehouse, use_schema: bool,
                             branch: str | None) -> None:
    """``testIcebergSinkUnpartitionedTable``: one or two files, two records in all."""
    topic, table = unique("it_unpart"), f"{DB}.foobar_{unique('u')}"
    create_topic(bootstrap, topic, 1)
    create_test_table(warehouse, table, partitioned=False)
    send(bootstrap, topic, [(1, event(1, "type1", NOW_MS, "hello world!", use_schema)),
                            (2, event(2, "type2", NOW_MS - 3 * DAY_MS, "having fun?", use_schema))])
    config = {**common_config(topic, warehouse, use_schema, branch), "iceberg.tables": table}
    run(spark, bootstrap, config, warehouse, [table])

    files = added_files(warehouse, table, branch)
    assert 1 <= len(files) <= 2 and sum(int(f.recordCount()) for f in files) == 2
    assert_snapshot_props(warehouse, table, branch, f"connect-{config['name']}")
    assert [r[0] for r in rows(warehouse, table, branch)] == [1, 2]


@pytest.mark.parametrize(("use_schema", "branch"), VARIANTS[:2])
def test_schema_evolution(bootstrap: str, spark: SparkRuntime, warehouse: Warehouse, use_schema: bool,
                          branch: str | None) -> None:
    """``testIcebergSinkSchemaEvolution``: a table of (id int, type string) takes the events; with a schema id
    becomes long and ts a timestamp; without one, id stays int (no type is promoted) and ts, a number, is a
    long column."""
    topic, table = unique("it_evolve"), f"{DB}.foobar_{unique('e')}"
    create_topic(bootstrap, topic, 1)
    warehouse.sql(f"CREATE NAMESPACE IF NOT EXISTS {{c}}.{DB}")
    warehouse.sql(f"CREATE TABLE {{c}}.{table} (id int NOT NULL, type string NOT NULL) USING iceberg")
    send(bootstrap, topic, [(1, event(1, "type1", NOW_MS, "hello world!", use_schema)),
                            (2, event(2, "type2", NOW_MS - 3 * DAY_MS, "having fun?", use_schema))])
    config = {**common_config(topic, warehouse, use_schema, branch), "iceberg.tables": table,
              "iceberg.tables.evolve-schema-enabled": "true"}
    run(spark, bootstrap, config, warehouse, [table])

    files = added_files(warehouse, table, branch)
    assert 1 <= len(files) <= 2 and sum(int(f.recordCount()) for f in files) == 2
    assert_snapshot_props(warehouse, table, branch, f"connect-{config['name']}")
    assert_generated_schema(warehouse, table, use_schema, "long" if use_schema else "int")


@pytest.mark.parametrize(("use_schema", "branch"), VARIANTS[:2])
def test_auto_create(bootstrap: str, spark: SparkRuntime, warehouse: Warehouse, use_schema: bool,
                     branch: str | None) -> None:
    """``testIcebergSinkAutoCreate``: the table made from the first records, partitioned by hour(ts) where
    there is a schema (a schemaless ts is a number: a long column, which no hour() takes)."""
    topic, table = unique("it_create"), f"{DB}.foobar_{unique('c')}"
    create_topic(bootstrap, topic, 1)
    send(bootstrap, topic, [(1, event(1, "type1", NOW_MS, "hello world!", use_schema)),
                            (2, event(2, "type2", NOW_MS - 3 * DAY_MS, "having fun?", use_schema))])
    config = {**common_config(topic, warehouse, use_schema, branch), "iceberg.tables": table,
              "iceberg.tables.auto-create-enabled": "true"}
    if use_schema:
        config["iceberg.tables.default-partition-by"] = "hour(ts)"
    run(spark, bootstrap, config, warehouse, [table])

    files = added_files(warehouse, table, branch)
    assert 1 <= len(files) <= 2 and sum(int(f.recordCount()) for f in files) == 2
    assert_snapshot_props(warehouse, table, branch, f"connect-{config['name']}")
    assert_generated_schema(warehouse, table, use_schema, "long")
    assert bool(warehouse.table(table).spec().isPartitioned()) == use_schema


def assert_generated_schema(warehouse: Warehouse, table: str, use_schema: bool, id_type: str) -> None:
    assert column_type(warehouse, table, "id") == id_type
    assert column_type(warehouse, table, "type") == "string"
    assert column_type(warehouse, table, "payload") == "string"
    if not use_schema:
        assert column_type(warehouse, table, "ts") == "long"  # without a schema only the primitive type maps
        assert column_type(warehouse, table, "op") is None  # a field that was null is not added
    else:
        assert column_type(warehouse, table, "ts") == "timestamptz"
        assert column_type(warehouse, table, "op") == "string"


@pytest.mark.parametrize(("use_schema", "branch"), VARIANTS[:2])
def test_multi_table_routing(bootstrap: str, spark: SparkRuntime, warehouse: Warehouse, use_schema: bool,
                             branch: str | None) -> None:
    """``TestIntegrationMultiTable``: route-regex on ``type``; an event matching neither table goes nowhere."""
    topic = unique("it_multi")
    one, two = f"{DB}.foobar1_{unique('m')}", f"{DB}.foobar2_{unique('m')}"
    create_topic(bootstrap, topic, 1)
    create_test_table(warehouse, one, partitioned=True)
    create_test_table(warehouse, two, partitioned=False)
    send(bootstrap, topic, [(1, event(1, "type1", NOW_MS, "hello world!", use_schema)),
                            (2, event(2, "type2", NOW_MS, "having fun?", use_schema)),
                            (3, event(3, "type3", NOW_MS, "ignore me", use_schema))])
    config = {**common_config(topic, warehouse, use_schema, branch), "iceberg.tables": f"{one}, {two}",
              "iceberg.tables.route-field": "type", f"iceberg.table.{one}.route-regex": "type1",
              f"iceberg.table.{two}.route-regex": "type2"}
    run(spark, bootstrap, config, warehouse, [one, two])

    assert_one_row_each(warehouse, {one: 1, two: 2}, branch, config)


@pytest.mark.parametrize(("use_schema", "branch"), VARIANTS[:2])
def test_dynamic_routing_skips_a_table_that_does_not_exist(bootstrap: str, spark: SparkRuntime,
                                                          warehouse: Warehouse, use_schema: bool,
                                                          branch: str | None) -> None:
    """``TestIntegrationDynamicTable``: ``payload`` names the table; the third event names test.tbl3, which does
    not exist with auto-create off: it is skipped, and both other tables get their commit."""
    topic = unique("it_dyn")
    one, two = f"{DB}.tbl1_{unique('d')}", f"{DB}.tbl2_{unique('d')}"
    create_topic(bootstrap, topic, 1)
    create_test_table(warehouse, one, partitioned=True)
    create_test_table(warehouse, two, partitioned=False)
    send(bootstrap, topic, [(1, event(1, "type1", NOW_MS, one, use_schema)),
                            (2, event(2, "type2", NOW_MS, two, use_schema)),
                            (3, event(3, "type3", NOW_MS, f"{DB}.tbl3_{unique('d')}", use_schema))])
    config = {**common_config(topic, warehouse, use_schema, branch), "iceberg.tables.dynamic-enabled": "true",
              "iceberg.tables.route-field": "payload"}
    run(spark, bootstrap, config, warehouse, [one, two])

    assert_one_row_each(warehouse, {one: 1, two: 2}, branch, config)


def test_dynamic_route_with_topic_rewriting_smt(bootstrap: str, spark: SparkRuntime, warehouse: Warehouse) -> None:
    """``testDynamicRouteWithTopicRewritingSMT``: RegexRouter gives every record the topic test.smttbl, and
    InsertField$Value copies that topic into srcTopic, the route field; the table gets both events, and its
    snapshot records the offsets of the topic they were read from, not the rewritten one."""
    topic, table = unique("it_smt"), f"{DB}.smttbl_{unique('s')}"
    create_topic(bootstrap, topic, 1)
    create_test_table(warehouse, table, partitioned=False)
    send(bootstrap, topic, [(1, event(1, "type1", NOW_MS, "hello", False)),
                            (2, event(2, "type2", NOW_MS, "world", False))])
    config = {**common_config(topic, warehouse, False, None), "iceberg.tables.dynamic-enabled": "true",
              "iceberg.tables.route-field": "srcTopic", "transforms": "rewriteTopic,insertTopic",
              "transforms.rewriteTopic.type": "org.apache.kafka.connect.transforms.RegexRouter",
              "transforms.rewriteTopic.regex": ".*", "transforms.rewriteTopic.replacement": table,
              "transforms.insertTopic.type": "org.apache.kafka.connect.transforms.InsertField$Value",
              "transforms.insertTopic.topic.field": "srcTopic"}
    run(spark, bootstrap, config, warehouse, [table])

    files = added_files(warehouse, table, None)
    assert 1 <= len(files) <= 2 and sum(int(f.recordCount()) for f in files) == 2
    group = f"connect-{config['name']}"
    assert_snapshot_props(warehouse, table, None, group)
    assert warehouse.offsets(table, group) == {(topic, 0): 2}
    assert [r[0] for r in rows(warehouse, table, None)] == [1, 2]


@pytest.mark.parametrize("mode", ["cdc", "upsert"])
def test_cdc_and_upsert_take_the_tables_identifier_fields(bootstrap: str, spark: SparkRuntime,
                                                          warehouse: Warehouse, mode: str) -> None:
    """Tabular's CDC and upsert cases: a table whose identifier field is id, and no id columns set; inserts,
    an update and a delete, in two rounds, leave the last change per key."""
    topic, table = unique(f"it_{mode}"), f"{DB}.{mode}_{unique('k')}"
    create_topic(bootstrap, topic, 1)
    create_test_table(warehouse, table, partitioned=True)
    keys = {"iceberg.tables.cdc-field": "op"} if mode == "cdc" else {"iceberg.tables.upsert-mode-enabled": "true"}
    config = {**common_config(topic, warehouse, False, None), "iceberg.tables": table, **keys}
    group = f"connect-{config['name']}"
    first = [(1, event(1, "type1", NOW_MS, "one", False, "I")), (2, event(2, "type1", NOW_MS, "two", False, "I")),
             (3, event(3, "type1", NOW_MS, "three", False, "I"))]
    if mode == "cdc":
        second = [(1, event(1, "type2", NOW_MS, "one again", False, "U")),
                  (2, event(2, "type1", NOW_MS, "two", False, "D"))]
    else:
        second = [(1, event(1, "type2", NOW_MS, "one again", False)), (4, event(4, "type1", NOW_MS, "four", False))]
    sent = 0
    for batch in (first, second):
        send(bootstrap, topic, batch)
        sent += len(batch)
        code, _ = run_in_process(spark, worker_props(bootstrap), [config], until=lambda _d, n=sent: sum(
            warehouse.offsets(table, group).values()) >= n, timeout=90)
        assert code == 0
    got = {r[0]: r[3] for r in rows(warehouse, table, None)}
    want = {1: "one again", 3: "three"} if mode == "cdc" else {1: "one again", 2: "two", 3: "three", 4: "four"}
    assert got == want
    assert {r[0]: r[3] for r in duck_rows(warehouse, table)} == want
    assert list(warehouse.table(table).schema().identifierFieldNames()) == ["id"]
    warehouse.assert_intact(table)
