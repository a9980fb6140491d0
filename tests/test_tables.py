"""Tables: auto-creation with every partition transform, and keyed tables that cannot be keyed."""

from __future__ import annotations

import datetime
import json
import threading
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa

from tabletopic.config.connector import parse_connector
from tabletopic.config.worker import parse_worker
from tabletopic.write.iceberg_tables import IcebergTables, TablesSettings
from tabletopic.write.spark_session import SparkRuntime
from tabletopic.write.table_handle import TableError, TableHandle
from tests.support import Warehouse, connector_props, create_topic, produce, run_in_process, unique, worker_props

WORKER = parse_worker({"bootstrap.servers": "127.0.0.1:9", "listeners": ""})
SAMPLE = pa.schema([("id", pa.int64()), ("name", pa.string()), ("ts", pa.timestamp("us", tz="UTC")),
                    ("day", pa.date32()), ("amount", pa.decimal128(10, 2))])


def test_every_partition_transform(spark: SparkRuntime, warehouse: Warehouse) -> None:
    partition_by = "identity(name),year(ts),month(day),bucket(id, 16),truncate(name, 3)"
    hourly = "hours(ts),truncate(amount, 100)"
    config = parse_connector({
        "name": "t", "topics": "t", "iceberg.tables": "parts.a,parts.b", "iceberg.tables.auto-create-enabled": "true",
        "iceberg.tables.default-partition-by": partition_by, "iceberg.table.parts.b.partition-by": hourly,
        "iceberg.tables.auto-create-props.write.format.default": "parquet",
        **warehouse.connector_props()}, WORKER)
    tables = IcebergTables(spark, TablesSettings.of(config))
    a = tables.get("parts.a", SAMPLE).java
    assert [(f.name(), f.transform().toString()) for f in a.spec().fields()] == [
        ("name", "identity"), ("ts_year", "year"), ("day_month", "month"), ("id_bucket", "bucket[16]"),
        ("name_trunc", "truncate[3]")]
    assert a.operations().current().formatVersion() == 2
    assert a.properties().get("write.format.default") == "parquet"
    # Bounded metadata, as AutoMQ creates its tables: old metadata.json files go, the last 10 stay.
    assert a.properties().get("write.metadata.delete-after-commit.enabled") == "true"
    assert a.properties().get("write.metadata.previous-versions-max") == "10"
    b = tables.get("parts.b", SAMPLE).java
    assert [f.transform().toString() for f in b.spec().fields()] == ["hour", "truncate[100]"]


def test_loaded_tables_are_bounded_and_a_dropped_one_is_loaded_again(spark: SparkRuntime,
                                                                      warehouse: Warehouse) -> None:
    config = parse_connector({
        "name": "t", "topics": "t", "iceberg.tables.auto-create-enabled": "true", "iceberg.tables": "lru.a",
        "tabletopic.tables.max-cached": "2", **warehouse.connector_props()}, WORKER)
    tables = IcebergTables(spark, TablesSettings.of(config))
    a = tables.get("lru.a", SAMPLE)
    assert tables.get("lru.a") is a  # kept
    tables.get("lru.b", SAMPLE)
    tables.get("lru.c", SAMPLE)  # the third: the least recently used, a, goes
    again = tables.get("lru.a")
    assert again is not a and again.schema_id == a.schema_id and again.arrow_schema == a.arrow_schema
    assert sorted(tables.known()) == ["lru.a", "lru.b", "lru.c"]  # what was written here, loaded or not
    assert tables.refresh("lru.b").name == "lru.b"  # b went when a came back; refresh loads it
    assert sorted(tables.java_tables().keySet()) == ["lru.a", "lru.b"]  # the JVM's map follows the bound


def test_tables_unused_for_the_idle_bound_are_released_and_loaded_again(spark: SparkRuntime,
                                                                        warehouse: Warehouse) -> None:
    now = [0.0]
    config = parse_connector({
        "name": "t", "topics": "t", "iceberg.tables.auto-create-enabled": "true", "iceberg.tables": "idle.a",
        "tabletopic.tables.idle-release-ms": "60000", **warehouse.connector_props()}, WORKER)
    tables = IcebergTables(spark, TablesSettings.of(config), clock=lambda: now[0])
    a, b, _ = (tables.get(f"idle.{n}", SAMPLE) for n in "abc")
    now[0] = 30.0
    assert tables.get("idle.b") is b  # used again: its idle time starts over
    now[0] = 60.0
    assert tables.release_idle() == ["idle.a", "idle.c"]
    assert tables.loaded("idle.b") and not tables.loaded("idle.a") and tables.loaded_count() == 1
    again = tables.get("idle.a")
    assert again is not a and again.arrow_schema == a.arrow_schema  # loaded from the catalog
    now[0] = 90.0
    assert tables.release_idle() == ["idle.b"]
    assert sorted(tables.known()) == ["idle.a", "idle.b", "idle.c"]
    # The JVM's map of loaded tables, for calls about many at once, follows: released ones leave it.
    assert sorted(tables.java_tables().keySet()) == ["idle.a"]


def test_an_answers_files_are_checked_against_their_tables_in_one_call(spark: SparkRuntime,
                                                                       warehouse: Warehouse) -> None:
    config = parse_connector({
        "name": "t", "topics": "t", "iceberg.tables.auto-create-enabled": "true", "iceberg.tables": "check.a",
        **warehouse.connector_props()}, WORKER)
    tables = IcebergTables(spark, TablesSettings.of(config))
    a = tables.get("check.a", SAMPLE)
    tables.get("check.b", SAMPLE)
    tables.forget("check.b")
    helper = spark.java_class("tabletopic.ContentFiles")
    inside = {"spec-id": 0, "content": "DATA", "file-path": a.java.location() + "/data/x.parquet",
              "file-format": "PARQUET", "partition": {}, "file-size-in-bytes": 10, "record-count": 1}
    outside = {**inside, "file-path": "/etc/passwd"}

    def check(files: dict[str, list[dict[str, object]]]) -> dict[str, object]:
        return json.loads(helper.invalidFiles(tables.java_tables(), json.dumps(files)))

    assert check({"check.a": [inside], "check.b": [outside]}) == {"invalid": None, "unchecked": ["check.b"]}
    report = check({"check.a": [outside]})
    assert "not under table" in str(report["invalid"]) and report["unchecked"] == []


def test_threads_opening_tables_at_once_share_each_tables_one_handle(spark: SparkRuntime,
                                                                    warehouse: Warehouse) -> None:
    """A Table Topic connector opens a fetch's new tables side by side: a table asked for by several
    threads at once is created once, and every one of them gets its handle."""
    config = parse_connector({
        "name": "t", "topics": "t", "iceberg.tables.auto-create-enabled": "true", "iceberg.tables": "many.a",
        **warehouse.connector_props()}, WORKER)
    tables = IcebergTables(spark, TablesSettings.of(config))
    names = [f"many.t{i % 4}" for i in range(16)]
    start = threading.Barrier(len(names))

    def open_table(name: str) -> TableHandle:
        start.wait()
        return tables.get(name, SAMPLE)

    with ThreadPoolExecutor(len(names)) as pool:
        handles = list(pool.map(open_table, names))
    for name, handle in zip(names, handles, strict=True):
        assert handle.name == name and handle is tables.get(name)
    assert sorted(tables.known()) == [f"many.t{i}" for i in range(4)]


def test_partition_by_a_missing_column_names_table_and_column(spark: SparkRuntime, warehouse: Warehouse) -> None:
    config = parse_connector({
        "name": "t", "topics": "t", "iceberg.tables": "parts.c", "iceberg.tables.auto-create-enabled": "true",
        "iceberg.tables.default-partition-by": "day(created)", **warehouse.connector_props()}, WORKER)
    try:
        IcebergTables(spark, TablesSettings.of(config)).get("parts.c", SAMPLE)
    except TableError as exc:
        assert "parts.c" in str(exc) and "day(created)" in str(exc)
    else:
        raise AssertionError("expected a TableError")


def test_upsert_into_a_table_without_the_id_columns_stops_with_a_clear_error(
        bootstrap: str, spark: SparkRuntime, warehouse: Warehouse) -> None:
    topic, table = unique("nokey"), "keys.existing"
    create_topic(bootstrap, topic, 1)
    warehouse.sql(f"CREATE TABLE {{c}}.{table} (account bigint, v bigint) USING iceberg")
    produce(bootstrap, topic, [(b"1", json.dumps({"account": 1, "v": 1}).encode(), 0)])
    connector = connector_props("nokey", topic, table, warehouse, {
        "value.converter.schemas.enable": "false", "iceberg.tables.upsert-mode-enabled": "true",
        "iceberg.tables.default-id-columns": "customer_id", "iceberg.control.commit.interval-ms": "1000"})
    code, daemon = run_in_process(spark, worker_props(bootstrap), [connector],
                                  until=lambda d: d.connectors[0].consumer.fatal is not None)
    assert code == 1
    message = str(daemon.connectors[0].consumer.fatal)
    assert "keys.existing" in message and "customer_id" in message and "id-columns" in message
    assert warehouse.rows(table) == []


def test_commit_branch_force_optional_and_case_insensitive(bootstrap: str, spark: SparkRuntime,
                                                           warehouse: Warehouse) -> None:
    from tests.connect_json import json_envelope

    topic, table = unique("branch"), "keys.branched"
    create_topic(bootstrap, topic, 1)
    schema = {"type": "struct", "optional": False, "fields": [
        {"field": "id", "type": "int64", "optional": False}, {"field": "Name", "type": "string", "optional": False}]}
    produce(bootstrap, topic, [(None, json_envelope(schema, {"id": i, "Name": f"n{i}"}), 0) for i in range(10)])
    connector = connector_props("branch", topic, table, warehouse, {
        "iceberg.tables.auto-create-enabled": "true", "iceberg.tables.default-commit-branch": "staging",
        "iceberg.tables.schema-force-optional": "true", "iceberg.control.commit.interval-ms": "1000"})
    code, _ = run_in_process(spark, worker_props(bootstrap), [connector], until=lambda d: sum(
        d.connectors[0].task.committed_offsets(table).values()) >= 10)
    assert code == 0
    java = warehouse.table(table)
    assert java.currentSnapshot() is None  # nothing on main
    assert {r.id for r in warehouse.sql(f"SELECT id FROM {{c}}.{table} VERSION AS OF 'staging'")} == set(range(10))
    assert all(f.isOptional() for f in java.schema().columns())  # force-optional, though the schema said required

    # A second connector writes "name" into the column created as "Name", matching without case.
    other = unique("nocase")
    create_topic(bootstrap, other, 1)
    produce(bootstrap, other, [(None, json.dumps({"ID": 100 + i, "name": f"m{i}"}).encode(), 0) for i in range(5)])
    connector2 = {**connector, "name": unique("nocase"), "topics": other, "value.converter.schemas.enable": "false",
                  "iceberg.tables.schema-case-insensitive": "true"}
    code, _ = run_in_process(spark, worker_props(bootstrap), [connector2], until=lambda d: sum(
        d.connectors[0].task.committed_offsets(table).values()) >= 5)
    assert code == 0
    rows = warehouse.sql(f"SELECT id, Name FROM {{c}}.{table} VERSION AS OF 'staging' WHERE id >= 100")
    assert sorted((r[0], r[1]) for r in rows) == [(100 + i, f"m{i}") for i in range(5)]


def test_a_commit_past_max_count_snapshots_expires_the_oldest_and_their_files(
        bootstrap: str, spark: SparkRuntime, warehouse: Warehouse) -> None:
    """An append table in auto maintenance: twelve waves, a commit each; never more than five snapshots."""
    import threading
    import time
    from pathlib import Path

    topic, table = unique("bounded"), "bounded.events"
    create_topic(bootstrap, topic, 1)
    connector = connector_props("bounded", topic, table, warehouse, {
        "iceberg.tables.auto-create-enabled": "true", "value.converter.schemas.enable": "false",
        "iceberg.control.commit.interval-ms": "500", "tabletopic.maintenance.snapshots.max-count": "4"})
    waves, per_wave = 12, 10
    sequence: list[int] = []

    def produce_waves() -> None:
        for wave in range(waves):
            produce(bootstrap, topic, [(None, json.dumps({"id": wave * per_wave + i}).encode(), 0)
                                       for i in range(per_wave)])
            deadline = time.monotonic() + 30  # each wave committed before the next: a snapshot each
            while time.monotonic() < deadline and sum(warehouse.offsets(table, group).values()) < (wave + 1) * per_wave:
                time.sleep(0.1)
            sequence.append(len(warehouse.snapshots(table)))

    group = f"connect-{connector['name']}"
    producer = threading.Thread(target=produce_waves, daemon=True)
    producer.start()
    code, _ = run_in_process(spark, worker_props(bootstrap), [connector], timeout=180, until=lambda d: sum(
        d.connectors[0].task.committed_offsets(table).values()) >= waves * per_wave and not producer.is_alive())
    assert code == 0
    java = warehouse.table(table)
    java.refresh()
    commits = int(java.currentSnapshot().sequenceNumber())
    assert commits >= waves and max(sequence) <= 5, (commits, sequence)
    assert sorted(r.id for r in warehouse.rows(table, "id")) == list(range(waves * per_wave))
    # The manifest lists of the expired snapshots were deleted with them.
    lists = list(Path(warehouse.location(table), "metadata").glob("snap-*.avro"))
    assert len(lists) == len(warehouse.snapshots(table)), lists


def test_arrow_encodes_only_the_tables_it_writes_as_icebergs_writer_does(spark: SparkRuntime,
                                                                      warehouse: Warehouse) -> None:
    def handle(name: str, **props: str) -> TableHandle:
        config = parse_connector({"name": "t", "topics": "t", "iceberg.tables": name,
                                  "iceberg.tables.auto-create-enabled": "true", **props,
                                  **warehouse.connector_props()}, WORKER)
        return IcebergTables(spark, TablesSettings.of(config)).get(name, SAMPLE)

    def layout(name: str, **props: str) -> object:
        return handle(name, **props).parquet

    assert layout("enc.plain") is not None
    # Equality deletes go to the unpartitioned spec, whatever the data files' is.
    parted = handle("enc.parted", **{"iceberg.tables.default-partition-by": "bucket(id, 4)"})
    assert parted.parquet is None and parted.delete_parquet is not None
    assert layout("enc.bloom", **{"iceberg.tables.write-props.write.parquet.bloom-filter-enabled.column.id":
                                  "true"}) is None
    assert layout("enc.lz4", **{"iceberg.tables.auto-create-props.write.parquet.compression-codec": "lz4"}) is None
    # Delete files' own settings, which fall back on the data files': lz4 for deletes only keeps data.
    lz4_deletes = handle("enc.dlz4", **{"iceberg.tables.write-props.write.delete.parquet.compression-codec": "lz4"})
    assert lz4_deletes.parquet is not None and lz4_deletes.delete_parquet is None
    snappy = handle("enc.dsnappy", **{"iceberg.tables.write-props.write.parquet.compression-codec": "snappy"})
    assert snappy.delete_parquet is not None and snappy.delete_parquet.codec == "snappy"
    assert snappy.delete_parquet.file_bytes == 64 * 1024 * 1024  # write.delete.target-file-size-bytes
    # A malformed size is Iceberg's writer's to report, as it was before Arrow wrote any file.
    assert layout("enc.bad", **{"iceberg.tables.write-props.write.parquet.page-size-bytes": "1MB"}) is None
    assert layout("enc.asked", **{"tabletopic.write.parquet-encoder": "iceberg"}) is None
    plain = layout("enc.sized", **{"iceberg.tables.write-props.write.parquet.compression-codec": "snappy",
                                   "iceberg.tables.auto-create-props.write.target-file-size-bytes": "1000000"})
    assert plain is not None and (plain.codec, plain.level, plain.file_bytes) == ("snappy", None, 1_000_000)


def test_arrow_and_icebergs_writer_make_the_same_rows_and_metrics(bootstrap: str, spark: SparkRuntime,
                                                                   warehouse: Warehouse) -> None:
    """Two connectors read one topic of Connect's types, one through each encoder: the tables' rows are
    equal, and so are their files' counts and bounds, read by Iceberg from the footers."""
    from tests.connect_json import ENVELOPE_SCHEMA, json_envelope, typed_row
    from tests.support import duckdb_connection

    schema = {**ENVELOPE_SCHEMA, "fields": [f for f in ENVELOPE_SCHEMA["fields"] if f["field"] != "at"]}
    topic, n = unique("encoders"), 250
    create_topic(bootstrap, topic, 1)
    payloads = []
    for i in range(n):
        row = typed_row(i, empty=i % 7 == 0)
        del row["at"]
        payloads.append((None, json_envelope(schema, row), 0))
    produce(bootstrap, topic, payloads)
    tables = {"arrow": "enc.by_arrow", "iceberg": "enc.by_iceberg"}
    connectors = [connector_props(f"enc-{encoder}", topic, table, warehouse, {
        "iceberg.tables.auto-create-enabled": "true", "tabletopic.write.parquet-encoder": encoder,
        "iceberg.control.commit.interval-ms": "2000"}) for encoder, table in tables.items()]
    pairs = list(tables.values())
    code, _ = run_in_process(spark, worker_props(bootstrap), connectors, until=lambda d: all(
        sum(c.task.committed_offsets(table).values()) >= n for c, table in zip(d.connectors, pairs, strict=True)))
    assert code == 0

    def rows(table: str) -> list[object]:
        return [tuple(r) for r in warehouse.sql(f"SELECT * FROM {{c}}.{table} ORDER BY id")]

    by_arrow = rows(tables["arrow"])
    assert len(by_arrow) == n and by_arrow == rows(tables["iceberg"])
    assert by_arrow[3][-1].name == "n3" and by_arrow[7][-1] is None
    metrics = "record_count, value_counts, null_value_counts, lower_bounds, upper_bounds"
    files = {e: sorted(map(tuple, warehouse.sql(f"SELECT {metrics} FROM {{c}}.{t}.files"))) for e, t in tables.items()}
    assert len(files["arrow"]) == len(files["iceberg"]) == 1 and files["arrow"][0][0] == n
    (_, values, nulls, lower, upper), theirs = files["arrow"][0], files["iceberg"][0]
    assert (lower, upper) == (theirs[3], theirs[4]) and lower, "bounds differ, or none were read from the footer"
    # Iceberg's writer counts a double's values from its own tally, which leaves out the nulls of a
    # null struct; the footer counts them as the spec says. Every other column agrees.
    score = warehouse.table(tables["arrow"]).schema().findField("who.score").fieldId()
    empty = len([i for i in range(n) if i % 7 == 0])
    assert (values.pop(score), nulls.pop(score)) == (n, empty)
    assert (theirs[1].pop(score), theirs[2].pop(score)) == (n - empty, 0)
    assert (values, nulls) == (theirs[1], theirs[2])
    duck = duckdb_connection().execute(
        "SELECT count(*), count(who.name), sum(price), max(day), count(attrs) "
        f"FROM iceberg_scan('{warehouse.location(tables['arrow'])}')").fetchone()
    filled = [i for i in range(n) if i % 7]
    assert duck[:2] == (n, len(filled)) and duck[4] == len(filled)
    assert duck[3] == datetime.date(1970, 1, 1) + datetime.timedelta(days=19_000 + max(filled))
    assert float(duck[2]) == sum(12_345 + i for i in filled) / 100
