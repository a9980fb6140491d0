"""Two daemons in one consumer group: rebalances and a crash lose nothing and write nothing twice."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.support import (
    DaemonProcess,
    Warehouse,
    create_topic,
    duckdb_connection,
    produce,
    unique,
    wait_until,
    worker_props,
)

PARTITIONS = 4


@pytest.mark.slow
def test_join_revoke_and_crash_keep_every_record_once(bootstrap: str, warehouse: Warehouse, tmp_path: Path) -> None:
    topic, table = unique("rebalance"), "group.events"
    create_topic(bootstrap, topic, PARTITIONS)
    connector = {"name": unique("shared"), "topics": topic, "iceberg.tables": table,
                 "value.converter.schemas.enable": "false", "iceberg.tables.auto-create-enabled": "true",
                 "iceberg.control.commit.interval-ms": "1500", **warehouse.connector_props()}
    group = f"connect-{connector['name']}"
    next_id = 0

    def wave(n: int) -> None:
        nonlocal next_id
        produce(bootstrap, topic, [(str(i).encode(), json.dumps({"id": i}).encode(), i % PARTITIONS)
                                   for i in range(next_id, next_id + n)])
        next_id += n

    def committed() -> int:
        return sum(warehouse.offsets(table, group).values())

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = DaemonProcess(tmp_path / "a", worker_props(bootstrap), [connector]).start()
    wave(20_000)
    wait_until(lambda: committed() > 0, 120, "daemon A commits", a)
    b = DaemonProcess(tmp_path / "b", worker_props(bootstrap), [connector]).start()  # A revokes half
    for _ in range(4):
        wave(5_000)
        time.sleep(1)
    wait_until(lambda: '"partitions assigned"' in b.output(), 120, "daemon B joins", b)
    wave(10_000)
    time.sleep(2)
    a.kill()  # B takes A's partitions from the offsets in the table
    wave(10_000)
    wait_until(lambda: committed() == next_id, 240, "every offset committed", b)
    assert b.terminate() == 0, b.output()[-3000:]
    assert '"partitions revoked", "level"' in a.output() or "partitions revoked" in a.output()

    count, distinct, low, high = warehouse.sql(
        f"SELECT count(*), count(DISTINCT id), min(id), max(id) FROM {{c}}.{table}")[0]
    assert (count, distinct, low, high) == (next_id, next_id, 0, next_id - 1)
    duck = duckdb_connection().execute(
        f"SELECT count(*), count(DISTINCT id) FROM iceberg_scan('{warehouse.location(table)}')").fetchone()
    assert tuple(duck) == (next_id, next_id)
