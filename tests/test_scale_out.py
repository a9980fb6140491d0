"""Several daemons, one sink: one coordinator commits each table once per round, through chaos."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support import (
    DaemonProcess,
    Warehouse,
    connector_props,
    create_topic,
    produce,
    unique,
    wait_until,
    worker_props,
)

PARTITIONS = 8
KEYS = 5000


def _record(i: int) -> tuple[bytes, bytes, int]:
    k = i % KEYS
    return str(k).encode(), json.dumps({"id": i, "k": k, "v": i}).encode(), k % PARTITIONS


@pytest.mark.timeout(420)
@pytest.mark.slow
def test_three_daemons_killed_added_and_removed_keep_both_tables_exact(
        bootstrap: str, warehouse: Warehouse, tmp_path: Path) -> None:
    topic = unique("chaos")
    create_topic(bootstrap, topic, PARTITIONS)
    base: dict[str, Any] = {"topics": topic, "value.converter.schemas.enable": "false",
                            "iceberg.tables.auto-create-enabled": "true",
                            "iceberg.control.commit.interval-ms": "2000", **warehouse.connector_props()}
    append = {**base, "name": unique("chaos_append"), "iceberg.tables": "chaos.events"}
    upsert = {**base, "name": unique("chaos_upsert"), "iceberg.tables": "chaos.latest",
              "iceberg.tables.upsert-mode-enabled": "true", "iceberg.tables.default-id-columns": "k"}
    groups = {"chaos.events": f"connect-{append['name']}", "chaos.latest": f"connect-{upsert['name']}"}

    def committed(table: str) -> int:
        return sum(warehouse.offsets(table, groups[table]).values())

    slots = 0

    def new_daemon() -> DaemonProcess:
        nonlocal slots
        slots += 1
        workdir = tmp_path / f"d{slots}"
        workdir.mkdir()
        return DaemonProcess(workdir, worker_props(bootstrap), [append, upsert]).start()

    started = time.monotonic()
    running = [new_daemon() for _ in range(3)]
    rng = random.Random(6)
    total, wave = 200_000, 20_000
    actions = ["kill", "add", "kill", "remove", "none", "kill", "add", "remove", "none", "none"]
    for number in range(total // wave):
        produce(bootstrap, topic, [_record(i) for i in range(number * wave, (number + 1) * wave)])
        time.sleep(rng.uniform(1, 4))
        action = actions[number]
        if action == "kill":
            victim = rng.choice(running)
            victim.kill()
            victim.start()  # the same member comes back after a crash
        elif action == "add":
            running.append(new_daemon())
        elif action == "remove" and len(running) > 1:
            victim = running.pop(rng.randrange(len(running)))
            assert victim.terminate() == 0, victim.output()[-3000:]
    for table in groups:
        wait_until(lambda t=table: committed(t) == total, 600, f"{table} caught up", running[0])
    elapsed = time.monotonic() - started
    for daemon in running:
        assert daemon.terminate() == 0, daemon.output()[-3000:]

    for table in groups:
        warehouse.assert_intact(table)
    count, distinct, checksum = warehouse.sql("SELECT count(*), count(DISTINCT id), sum(id) FROM {c}.chaos.events")[0]
    assert (count, distinct, checksum) == (total, total, total * (total - 1) // 2)
    latest = {r.k: r.v for r in warehouse.rows("chaos.latest", "k, v")}
    assert latest == {k: max(range(k, total, KEYS)) for k in range(KEYS)}
    # One coordinator: about one snapshot per round, not one per daemon.
    rounds = elapsed / 2.0
    for table in groups:
        snapshots = len(warehouse.snapshots(table))
        assert snapshots <= rounds + 20, (table, snapshots, rounds)


@pytest.mark.slow
def test_an_idle_daemon_does_not_hold_commits_up(bootstrap: str, warehouse: Warehouse, tmp_path: Path) -> None:
    """Rounds end when every partition has answered, the idle coordinator's included.

    The round timeout is ten minutes, so a round held up by a member that has no data would not end
    within any wait here: each wave is committed before the next is produced, which needs a round
    that completed by coverage, once per wave.
    """
    topic, table = unique("idle"), "idle.events"
    create_topic(bootstrap, topic, 2)
    connector = connector_props("idle", topic, table, warehouse, {
        "value.converter.schemas.enable": "false", "iceberg.tables.auto-create-enabled": "true",
        "iceberg.control.commit.interval-ms": "1000", "iceberg.control.commit.timeout-ms": "600000"})
    group = f"connect-{connector['name']}"
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = DaemonProcess(tmp_path / "a", worker_props(bootstrap), [connector]).start()
    b = DaemonProcess(tmp_path / "b", worker_props(bootstrap), [connector]).start()
    wait_until(lambda: a.output().count('"partitions assigned"') + b.output().count('"partitions assigned"') >= 2
               and all('"partitions": 1, "seeked"' in d.output() for d in (a, b)), 120, "one partition each", a)
    # Only partition 1 gets records: the member owning partition 0 (the coordinator) stays idle.
    for wave in range(4):
        ids = range(wave * 100, wave * 100 + 100)
        produce(bootstrap, topic, [(None, json.dumps({"id": i}).encode(), 1) for i in ids])
        wait_until(lambda n=wave: sum(warehouse.offsets(table, group).values()) == (n + 1) * 100, 120,
                   f"wave {wave} committed", b)
    assert a.terminate() == 0 and b.terminate() == 0
    assert sorted(r.id for r in warehouse.rows(table, "id")) == list(range(400))
