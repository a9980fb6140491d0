"""Two daemons in one consumer group: rebalances and a crash lose nothing and write nothing twice."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from tests.support import (
    DaemonProcess,
    Warehouse,
    connector_props,
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
    connector = connector_props("shared", topic, table, warehouse, {
        "value.converter.schemas.enable": "false", "iceberg.tables.auto-create-enabled": "true",
        "iceberg.control.commit.interval-ms": "1500"})
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

    warehouse.assert_intact(table)
    count, distinct, low, high = warehouse.sql(
        f"SELECT count(*), count(DISTINCT id), min(id), max(id) FROM {{c}}.{table}")[0]
    assert (count, distinct, low, high) == (next_id, next_id, 0, next_id - 1)
    duck = duckdb_connection().execute(
        f"SELECT count(*), count(DISTINCT id) FROM iceberg_scan('{warehouse.location(table)}')").fetchone()
    assert tuple(duck) == (next_id, next_id)


@pytest.mark.slow
def test_a_frozen_coordinator_never_commits_after_another_took_over(bootstrap: str, warehouse: Warehouse,
                                                                    tmp_path: Path) -> None:
    """A zombie: SIGSTOP with records buffered, another daemon takes over and coordinates, SIGCONT."""
    topic, table = unique("zombie"), "group.zombie"
    create_topic(bootstrap, topic, 2)
    connector = connector_props("zombie", topic, table, warehouse, {
        "value.converter.schemas.enable": "false", "iceberg.tables.auto-create-enabled": "true",
        "iceberg.control.commit.interval-ms": "5000"})
    group = f"connect-{connector['name']}"

    def wave(start: int, n: int) -> None:
        produce(bootstrap, topic, [(None, json.dumps({"id": i}).encode(), i % 2) for i in range(start, start + n)])

    def committed() -> int:
        return sum(warehouse.offsets(table, group).values())

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = DaemonProcess(tmp_path / "a", worker_props(bootstrap), [connector]).start()
    wave(0, 1500)
    wait_until(lambda: committed() == 1500, 120, "daemon A's first commit", a, every=0.1)
    # The first round can outlast the interval (the table is created, the JVM is cold), and then the
    # next one starts at once. The second comes on the interval's cadence, so once it has committed
    # the next round is most of an interval away.
    wave(1500, 1500)
    wait_until(lambda: committed() == 3000, 120, "daemon A commits", a, every=0.1)
    wave(3000, 3000)  # fetched and buffered by A, whose next round is about 5 s away
    time.sleep(1.0)
    assert a.proc is not None
    os.kill(a.proc.pid, signal.SIGSTOP)
    try:
        assert committed() == 3000
        b = DaemonProcess(tmp_path / "b", worker_props(bootstrap), [connector]).start()
        # B gets both partitions once A's session expires, reads 3000 from the table, commits the rest.
        wait_until(lambda: committed() == 6000, 180, "daemon B takes over", b)
        wave(6000, 1000)
        wait_until(lambda: committed() == 7000, 120, "daemon B goes on", b)
    finally:
        os.kill(a.proc.pid, signal.SIGCONT)
    # A wakes as coordinator of an old generation, its round overdue and 3000 records buffered.
    wait_until(lambda: "no longer coordinating" in a.output(), 120, "daemon A steps down", a)
    wave(7000, 1000)
    wait_until(lambda: committed() == 8000, 120, "every offset committed", b)
    assert b.terminate() == 0, b.output()[-3000:]
    assert a.terminate() == 0, a.output()[-3000:]
    count, distinct = warehouse.sql(f"SELECT count(*), count(DISTINCT id) FROM {{c}}.{table}")[0]
    assert (count, distinct) == (8000, 8000)
    # Every snapshot names the coordinator generation that made it, and they never go back.
    epochs = [int(s["summary"][f"tabletopic.coordinator-epoch.{group}"]) for s in warehouse.snapshots(table)]
    assert epochs == sorted(epochs) and epochs[-1] > epochs[0]
