"""Schema evolution in place: new optional fields (top level and nested), wider types, no rewrite."""

from __future__ import annotations

from typing import Any

from tabletopic.write.spark_session import SparkRuntime
from tests.connect_json import json_envelope
from tests.support import (
    Warehouse,
    connector_props,
    create_topic,
    duckdb_connection,
    produce,
    run_in_process,
    unique,
    worker_props,
)


def schema(version: int) -> dict[str, Any]:
    address = [{"field": "city", "type": "string", "optional": True}]
    if version >= 2:
        address.append({"field": "zip", "type": "string", "optional": True})
    fields = [{"field": "id", "type": "int64", "optional": False},
              {"field": "amount", "type": "int32" if version == 1 else "int64", "optional": False},
              {"field": "address", "type": "struct", "optional": True, "fields": address}]
    if version >= 3:
        fields.append({"field": "note", "type": "string", "optional": True})
    return {"type": "struct", "optional": False, "fields": fields}


def record(version: int, i: int) -> dict[str, Any]:
    address: dict[str, Any] = {"city": f"c{i}"}
    if version >= 2:
        address["zip"] = f"z{i}"
    value: dict[str, Any] = {"id": i, "amount": i if version == 1 else 3_000_000_000 + i, "address": address}
    if version >= 3:
        value["note"] = f"n{i}"
    return value


def _done(table: str, n: int) -> Any:
    return lambda d: sum(d.connectors[0].task.committed_offsets(table).values()) >= n


def test_v1_v2_v3_land_in_one_table(bootstrap: str, spark: SparkRuntime, warehouse: Warehouse) -> None:
    topic, table = unique("evolve"), "evo.accounts"
    create_topic(bootstrap, topic, 1)
    connector = connector_props("evolve", topic, table, warehouse, {
        "iceberg.tables.auto-create-enabled": "true", "iceberg.tables.evolve-schema-enabled": "true",
        "iceberg.control.commit.interval-ms": "1000"})
    sent = 0
    for version, ids in ((1, range(0, 50)), (2, range(50, 100)), (3, range(100, 150))):
        produce(bootstrap, topic, [(None, json_envelope(schema(version), record(version, i)), 0) for i in ids])
        sent += len(ids)
        code, _ = run_in_process(spark, worker_props(bootstrap), [connector], until=_done(table, sent))
        assert code == 0
    rows = {r.id: r for r in warehouse.rows(table, "id, amount, address, note")}
    assert sorted(rows) == list(range(150))
    assert rows[3].amount == 3 and rows[60].amount == 3_000_000_060  # int widened to long
    assert rows[3].address.city == "c3" and rows[3].address.zip is None and rows[3].note is None
    assert rows[60].address.zip == "z60" and rows[60].note is None
    assert rows[120].note == "n120" and rows[120].address.zip == "z120"
    java = warehouse.table(table)
    assert str(java.schema().findField("amount").type()) == "long"
    assert java.schema().findField("address.zip").isOptional() and java.schema().findField("note").isOptional()
    live = {r[0] for r in warehouse.sql(f"SELECT file_path FROM {{c}}.{table}.files")}
    ever = {r[0] for r in warehouse.sql(f"SELECT file_path FROM {{c}}.{table}.all_data_files")}
    assert live == ever and len(warehouse.snapshots(table)) == 3  # no data file was rewritten
    duck = duckdb_connection().execute(
        "SELECT count(*), count(note), count(address.zip), sum(amount) "
        f"FROM iceberg_scan('{warehouse.location(table)}')").fetchone()
    assert tuple(duck) == (150, 50, 100, sum(range(50)) + sum(3_000_000_000 + i for i in range(50, 150)))


def test_incompatible_change_names_table_field_and_types(bootstrap: str, spark: SparkRuntime,
                                                          warehouse: Warehouse) -> None:
    topic, table = unique("evolve_bad"), "evo.bad"
    create_topic(bootstrap, topic, 1)
    produce(bootstrap, topic, [(None, json_envelope(schema(1), record(1, 1)), 0)])
    bad = {"type": "struct", "optional": False, "fields": [{"field": "id", "type": "int64", "optional": False},
                                                         {"field": "amount", "type": "string", "optional": False}]}
    produce(bootstrap, topic, [(None, json_envelope(bad, {"id": 2, "amount": "lots"}), 0)])
    connector = connector_props("evolve_bad", topic, table, warehouse, {
        "iceberg.tables.auto-create-enabled": "true", "iceberg.tables.evolve-schema-enabled": "true",
        "iceberg.control.commit.interval-ms": "1000"})
    code, daemon = run_in_process(spark, worker_props(bootstrap), [connector],
                                  until=lambda d: d.connectors[0].consumer.fatal is not None)
    assert code == 1
    message = str(daemon.connectors[0].consumer.fatal)
    assert "evo.bad" in message and "amount" in message and "int32" in message and "string" in message
    # Nothing of the fetch that held the bad record is committed; record 1 may have shared it.
    assert {r.id for r in warehouse.rows(table, "id")} <= {1}


def test_a_schema_change_that_races_another_commit_is_planned_again(spark: SparkRuntime, warehouse: Warehouse) -> None:
    import numpy as np
    import pyarrow as pa

    from tabletopic.buffer.partition_ledger import PartitionLedger
    from tabletopic.config.connector import parse_connector
    from tabletopic.config.worker import parse_worker
    from tabletopic.convert.records import SinkRecords
    from tabletopic.write.iceberg_tables import IcebergTables, TablesSettings
    from tabletopic.write.table_shaper import TableShaper

    config = parse_connector({"name": "race", "topics": "t", "iceberg.tables": "race.t",
                              "iceberg.tables.auto-create-enabled": "true",
                              "iceberg.tables.evolve-schema-enabled": "true", **warehouse.connector_props()},
                             parse_worker({"listeners": ""}))
    tables = IcebergTables(spark, TablesSettings.of(config))
    handle = tables.get("race.t", pa.schema([pa.field("id", pa.int64())]))
    # Another commit lands after the handle was read (as the coordinator's does): its metadata is stale.
    warehouse.table("race.t").updateProperties().set("touched", "yes").commit()
    shaper = TableShaper(tables, PartitionLedger(lambda _: {}), "race", False, evolve_schema=True)
    rows = pa.table({"id": pa.array([1], pa.int64()), "note": pa.array(["x"], pa.string())})
    evolved = shaper._evolve(handle, SinkRecords("t", 0, rows, np.zeros(1, np.int64), np.zeros(1, np.int64),
                                                 np.zeros(1, np.int64)))
    assert evolved.arrow_schema.names == ["id", "note"]
    assert warehouse.table("race.t").properties().get("touched") == "yes"


def test_opening_tables_makes_every_catalog_call_off_the_event_loop(spark: SparkRuntime, warehouse: Warehouse,
                                                                     monkeypatch: Any) -> None:
    """A table created, a schema evolved, a table that deletes go to looked up: the JVM is called for each,
    and never from the event loop's thread, where it would hold every connector's rounds behind it."""
    import asyncio
    import threading

    import numpy as np
    import pyarrow as pa

    from tabletopic.buffer.partition_ledger import PartitionLedger
    from tabletopic.config.connector import parse_connector
    from tabletopic.config.worker import parse_worker
    from tabletopic.convert.records import DELETE, SinkRecords
    from tabletopic.write.iceberg_tables import IcebergTables, TablesSettings
    from tabletopic.write.table_shaper import TableShaper

    config = parse_connector({"name": "loop", "topics": "t", "iceberg.tables": "loop.new,loop.grown,loop.gone",
                              "iceberg.tables.auto-create-enabled": "true",
                              "iceberg.tables.evolve-schema-enabled": "true", **warehouse.connector_props()},
                             parse_worker({"listeners": ""}))
    tables = IcebergTables(spark, TablesSettings.of(config))
    tables.get("loop.grown", pa.schema([pa.field("id", pa.int64())]))
    shaper = TableShaper(tables, PartitionLedger(lambda _: {}), "loop", False, evolve_schema=True)
    zeros = np.zeros(2, np.int64)
    wide = SinkRecords("t", 0, pa.table({"id": pa.array([1, 2], pa.int64()), "note": ["x", "y"]}), zeros, zeros,
                       np.arange(2, dtype=np.int64))
    deletes = SinkRecords("t", 0, pa.table({"id": pa.array([1, 2], pa.int64())}), zeros, zeros,
                          np.arange(2, dtype=np.int64)).with_ops(np.full(2, DELETE, dtype=np.int8))
    changes = {"loop.new": [wide], "loop.grown": [wide], "loop.gone": [deletes]}

    client = spark.session.sparkContext._gateway._gateway_client
    send, on_loop, off_loop = client.send_command, [], []

    def watched(command: str, *args: Any, **kwargs: Any) -> Any:
        (on_loop if threading.current_thread() is threading.main_thread() else off_loop).append(command[:80])
        return send(command, *args, **kwargs)

    async def open_and_prepare() -> tuple[frozenset[str], dict[str, Any]]:
        monkeypatch.setattr(client, "send_command", watched)
        try:
            absent = await shaper.open(changes)
            return absent, {t: shaper.prepare(t, records, absent) for t, [records] in changes.items()}
        finally:
            monkeypatch.undo()

    absent, prepared = asyncio.run(open_and_prepare())
    assert on_loop == [], on_loop[:10]
    assert off_loop, "the watch saw no JVM call at all: it watches the wrong client"
    assert absent == {"loop.gone"} and prepared["loop.gone"] == ([], [])
    for table in ("loop.new", "loop.grown"):
        assert [f.name() for f in warehouse.table(table).schema().columns()] == ["id", "note"]
        [part], failures = prepared[table]
        assert failures == [] and part.value.column("note").to_pylist() == ["x", "y"]
