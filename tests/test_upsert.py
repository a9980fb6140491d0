"""Upsert and CDC: equality deletes and rows in one snapshot, checked against a model dict."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import pytest

from tabletopic.offsets.source_offsets import offsets_key
from tabletopic.write.spark_session import SparkRuntime
from tests.support import (
    DaemonProcess,
    Warehouse,
    create_topic,
    duckdb_connection,
    produce,
    run_in_process,
    unique,
    wait_until,
    worker_props,
)

PARTITIONS = 4
DAY_S = 86_400
BASE_S = 1_790_000_000


class Model:
    """What the table must hold: the last change per key, in offset order within a partition."""

    def __init__(self, seed: int, keys: int) -> None:
        self.rng = random.Random(seed)
        self.keys = keys
        self.rows: dict[int, tuple[int, str]] = {}
        self.per_partition = [0] * PARTITIONS
        self.version = 0
        self.history: dict[int, list[tuple[int, str]]] = {}  # key -> (offset, change), to explain a mismatch

    def changes(self, n: int) -> list[tuple[bytes | None, bytes | None, int]]:
        out = []
        for _ in range(n):
            key = self.rng.randrange(self.keys)
            partition = key % PARTITIONS
            roll = self.rng.random()
            if roll < 0.12:
                value = None  # tombstone
                self.rows.pop(key, None)
            elif roll < 0.25:
                value = json.dumps({"id": key, "op": "D"}).encode()
                self.rows.pop(key, None)
            else:
                self.version += 1
                # The day moves around, so a key's row changes partition under day(updated_at).
                ts = BASE_S + self.rng.randrange(5) * DAY_S + self.rng.randrange(DAY_S)
                iso = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))
                op = "U" if key in self.rows else self.rng.choice(["I", "U"])
                value = json.dumps({"id": key, "op": op, "v": self.version, "updated_at": iso}).encode()
                self.rows[key] = (self.version, iso.replace("T", " ").rstrip("Z"))
            out.append((str(key).encode(), value, partition))
            kind = "tombstone" if value is None else json.loads(value)["op"]
            self.history.setdefault(key, []).append((self.per_partition[partition], kind))
            self.per_partition[partition] += 1
        return out

    @property
    def produced(self) -> int:
        return sum(self.per_partition)


def _spark_state(warehouse: Warehouse, table: str) -> dict[int, tuple[int, str]]:
    rows = warehouse.sql(f"SELECT id, v, date_format(updated_at, 'yyyy-MM-dd HH:mm:ss') FROM {{c}}.{table}")
    state = {int(r[0]): (int(r[1]), r[2]) for r in rows}
    assert len(state) == len(rows), "a key appears twice"
    return state


def _duckdb_state(warehouse: Warehouse, table: str) -> dict[int, tuple[int, str]]:
    rows = duckdb_connection().execute(
        f"SELECT id, v, strftime(updated_at AT TIME ZONE 'UTC', '%Y-%m-%d %H:%M:%S') "
        f"FROM iceberg_scan('{warehouse.location(table)}')").fetchall()
    state = {int(r[0]): (int(r[1]), r[2]) for r in rows}
    assert len(state) == len(rows), "a key appears twice (DuckDB)"
    return state


@pytest.mark.slow
def test_random_changes_with_sigkills_match_the_model(bootstrap: str, warehouse: Warehouse, tmp_path: Path) -> None:
    topic, table = unique("changes"), "cdc.accounts"
    create_topic(bootstrap, topic, PARTITIONS)
    connector = {
        "name": unique("upsert"), "topics": topic, "iceberg.tables": table,
        "value.converter.schemas.enable": "false",
        "iceberg.tables.auto-create-enabled": "true",
        "iceberg.tables.default-id-columns": "id",
        "iceberg.tables.upsert-mode-enabled": "true",
        "iceberg.tables.cdc-field": "op",
        "iceberg.tables.default-partition-by": "day(updated_at)",
        "iceberg.control.commit.interval-ms": "1500",
        # Commits with equality deletes, the form every commit falls back to; the default form, with
        # position deletes, goes through SIGKILLs in tests/test_maintenance.py.
        "tabletopic.maintenance.equality-deletes.convert": "look",
        **warehouse.connector_props(),
    }
    group = f"connect-{connector['name']}"
    model = Model(seed=11, keys=300)
    daemon = DaemonProcess(tmp_path, worker_props(bootstrap), [connector])

    def committed() -> int:
        return sum(warehouse.offsets(table, group).values())

    # The first change to every key is an insert, so the table can be created from a record.
    produce(bootstrap, topic, [(str(k).encode(), json.dumps(
        {"id": k, "op": "I", "v": 0, "updated_at": "2026-09-20T00:00:00Z"}).encode(), k % PARTITIONS)
        for k in range(model.keys)])
    for k in range(model.keys):
        model.rows[k] = (0, "2026-09-20 00:00:00")
        model.per_partition[k % PARTITIONS] += 1

    phases = [(1500, True), (1500, False), (1500, True), (1000, False)]
    snapshots_before = 0
    for number, (changes, kill_midway) in enumerate(phases):
        daemon.start()
        chunk = model.changes(changes)
        produce(bootstrap, topic, chunk[: len(chunk) // 2])
        if kill_midway:
            time.sleep(random.Random(number).uniform(3, 8))
            daemon.kill()
            daemon.start()
        produce(bootstrap, topic, chunk[len(chunk) // 2:])
        wait_until(lambda: committed() == model.produced, 240, f"phase {number} committed", daemon)
        daemon.kill()
        state = _spark_state(warehouse, table)
        wrong = {k: model.history.get(k) for k in set(state) ^ set(model.rows)}
        wrong |= {k: model.history.get(k) for k in state if k in model.rows and state[k] != model.rows[k]}
        assert state == model.rows, f"phase {number}: Spark; history of the wrong keys: {wrong}"
        assert _duckdb_state(warehouse, table) == model.rows, f"phase {number}: DuckDB"
        snapshots = warehouse.snapshots(table)
        assert len(snapshots) > snapshots_before
        snapshots_before = len(snapshots)

    # Every commit is one snapshot carrying the offsets; deletes are equality deletes on id.
    t = warehouse.table(table)
    assert list(t.schema().identifierFieldNames()) == ["id"]
    id_field = t.schema().findField("id").fieldId()
    delete_specs = set()
    found_deletes = 0
    for snapshot in t.snapshots():
        assert snapshot.summary().containsKey(offsets_key(group))
        for delete in snapshot.addedDeleteFiles(t.io()):
            assert delete.content().id() == 2  # EQUALITY_DELETES
            assert list(delete.equalityFieldIds()) == [id_field]
            delete_specs.add(delete.specId())
            found_deletes += 1
    assert found_deletes > 0
    assert all(t.specs().get(s).isUnpartitioned() for s in delete_specs)
    assert [f.transform().toString() for f in t.spec().fields()] == ["day"]


def test_upsert_semantics_across_barriers(bootstrap: str, spark: SparkRuntime, warehouse: Warehouse) -> None:
    """Insert+delete in one batch, delete of a missing key, a key changing partition, tombstones."""
    topic, table = unique("keyed"), "cdc.small"
    create_topic(bootstrap, topic, 1)

    def change(key: int, op: str | None, v: int = 0, day: int = 0) -> tuple[bytes, bytes | None, int]:
        if op is None:
            return str(key).encode(), None, 0
        ts = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(BASE_S + day * DAY_S))
        return str(key).encode(), json.dumps({"id": key, "op": op, "v": v, "updated_at": ts}).encode(), 0

    steps = [
        [change(1, "I", 1), change(2, "I", 1), change(3, "I", 1), change(3, "D"), change(99, "D")],
        [change(1, "U", 2, day=3), change(2, None)],
        [change(1, None), change(4, "c", 5), change(4, "u", 6, day=1)],
    ]
    expected = [{1: 1, 2: 1}, {1: 2}, {4: 6}]
    connector = {"name": unique("small"), "topics": topic, "iceberg.tables": table,
                 "value.converter.schemas.enable": "false", "iceberg.tables.auto-create-enabled": "true",
                 "iceberg.tables.default-id-columns": "id", "iceberg.tables.cdc-field": "op",
                 "iceberg.tables.default-partition-by": "day(updated_at)",
                 "iceberg.control.commit.interval-ms": "1000", **warehouse.connector_props()}
    sent = 0
    for step, want in zip(steps, expected, strict=True):
        produce(bootstrap, topic, step)
        sent += len(step)
        code, _ = run_in_process(spark, worker_props(bootstrap), [connector], until=lambda d, n=sent: sum(
            d.connectors[0].task.committed_offsets(table).values()) >= n)
        assert code == 0
        got = {int(r.id): int(r.v) for r in warehouse.rows(table, "id, v")}
        assert got == want
