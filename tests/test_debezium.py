"""A Debezium change stream (JSON with schemas) replays into the current state of its tables."""

from __future__ import annotations

from typing import Any

from tabletopic.write.spark_session import SparkRuntime
from tests.debezium_source import COLUMNS, Source
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


def test_debezium_stream_replays_into_current_tables(bootstrap: str, spark: SparkRuntime,
                                                     warehouse: Warehouse) -> None:
    db = Source()
    for i in range(1001, 1021):  # the snapshot
        db.emit("customers", "r", {"id": i, "name": f"customer {i}", "email": f"c{i}@example.com"})
        db.emit("products", "r", {"id": i, "title": f"product {i}", "weight": i / 10})
    for i in range(1001, 1021, 3):
        db.emit("customers", "u", {"id": i, "name": f"customer {i} (renamed)", "email": f"new{i}@example.com"})
    for i in range(1002, 1021, 4):
        db.emit("customers", "d", ident=i)
        db.emit("products", "d", ident=i)
    db.emit("customers", "c", {"id": 2000, "name": "new customer", "email": "n@example.com"})
    db.emit("customers", "u", {"id": 2000, "name": "newer customer", "email": "n2@example.com"})
    db.emit("products", "c", {"id": 1002, "title": "back again", "weight": 1.5})  # re-created after its delete
    db.emit("customers", "c", {"id": 3000, "name": "short-lived", "email": None})
    db.emit("customers", "d", ident=3000)

    topics = {t: unique(f"dbserver1.inventory.{t}") for t in COLUMNS}
    for table, topic in topics.items():
        create_topic(bootstrap, topic, 1)
        produce(bootstrap, topic, db.events[table])
    total = sum(len(e) for e in db.events.values())
    connector = connector_props("debezium", ",".join(topics.values()), None, warehouse, {
        "key.converter": "org.apache.kafka.connect.json.JsonConverter", "key.converter.schemas.enable": "true",
        "value.converter.schemas.enable": "true", "transforms": "dbz",
        "transforms.dbz.type": "org.apache.iceberg.connect.transforms.DebeziumTransform",
        "transforms.dbz.cdc.target.pattern": "inventory_cdc.{table}", "iceberg.tables.dynamic-enabled": "true",
        "iceberg.tables.route-field": "_cdc.target", "iceberg.tables.cdc-field": "_cdc.op",
        "iceberg.tables.default-id-columns": "id", "iceberg.tables.auto-create-enabled": "true",
        "iceberg.control.commit.interval-ms": "1000"})

    def done(daemon: Any) -> bool:
        task = daemon.connectors[0].task
        offsets: dict[tuple[str, int], int] = {}
        for table_offsets in task.ledger.recorded().values():
            for tp, offset in table_offsets.items():
                offsets[tp] = max(offsets.get(tp, 0), offset)
        return sum(offsets.values()) >= total

    code, _ = run_in_process(spark, worker_props(bootstrap), [connector], until=done, timeout=180)
    assert code == 0
    con = duckdb_connection()
    for table, wanted in db.rows.items():
        columns = [c["field"] for c in COLUMNS[table]]
        got = {r.id: {c: getattr(r, c) for c in columns}
               for r in warehouse.rows(f"inventory_cdc.{table}", ", ".join(columns))}
        assert got == wanted, table
        duck = con.execute(f"SELECT {', '.join(columns)} FROM iceberg_scan("
                           f"'{warehouse.location('inventory_cdc.' + table)}')").fetchall()
        assert {r[0]: dict(zip(columns, r, strict=True)) for r in duck} == wanted, f"{table} (DuckDB)"
    ops = warehouse.sql("SELECT _cdc.op, _cdc.source, count(*) FROM {c}.inventory_cdc.customers GROUP BY 1, 2")
    assert {(r[0], r[1]) for r in ops} <= {("I", "inventory.customers"), ("U", "inventory.customers")}
