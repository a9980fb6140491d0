"""A keyed table's expected state: random inserts, updates, deletes and tombstones, and what each reader sees."""

from __future__ import annotations

import json
import random
import time
from collections import Counter

from tabletopic.config.connector import parse_connector
from tabletopic.config.worker import parse_worker
from tabletopic.write.pyiceberg_catalog import open_table
from tests.support import Warehouse, duckdb_connection, produce, worker_props

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


def seed(bootstrap: str, topic: str, model: Model) -> None:
    """The first change to every key is an insert, so the table can be created from a record."""
    batch = 20_000
    for start in range(0, model.keys, batch):
        produce(bootstrap, topic, [(str(k).encode(), json.dumps(
            {"id": k, "op": "I", "v": 0, "updated_at": "2026-09-20T00:00:00Z"}).encode(), k % PARTITIONS)
            for k in range(start, min(model.keys, start + batch))])
    for k in range(model.keys):
        model.rows[k] = (0, "2026-09-20 00:00:00")
        model.per_partition[k % PARTITIONS] += 1


def spark_state(warehouse: Warehouse, table: str) -> dict[int, tuple[int, str]]:
    rows = warehouse.sql(f"SELECT id, v, date_format(updated_at, 'yyyy-MM-dd HH:mm:ss') FROM {{c}}.{table}")
    state = {int(r[0]): (int(r[1]), r[2]) for r in rows}
    assert len(state) == len(rows), "a key appears twice"
    return state


def duckdb_state(warehouse: Warehouse, table: str) -> dict[int, tuple[int, str]]:
    rows = duckdb_connection().execute(
        f"SELECT id, v, strftime(updated_at AT TIME ZONE 'UTC', '%Y-%m-%d %H:%M:%S') "
        f"FROM iceberg_scan('{warehouse.location(table)}')").fetchall()
    state = {int(r[0]): (int(r[1]), r[2]) for r in rows}
    assert len(state) == len(rows), "a key appears twice (DuckDB)"
    return state


def pyiceberg_state(bootstrap: str, connector: dict[str, str], table: str) -> dict[int, tuple[int, str]]:
    """The table as pyiceberg reads it, through the connector's own catalog settings (no JVM)."""
    config = parse_connector(connector, parse_worker(worker_props(bootstrap)))
    scanned = open_table(config, table).scan(selected_fields=("id", "v", "updated_at")).to_arrow().to_pylist()
    state = {r["id"]: (r["v"], r["updated_at"].strftime("%Y-%m-%d %H:%M:%S")) for r in scanned}
    assert len(state) == len(scanned), "a key appears twice (pyiceberg)"
    return state


def position_deletes_added(warehouse: Warehouse, table: str, after: set[int] | None = None) -> list[str]:
    """The file format of each position delete the table's snapshots added (only those not in
    ``after``, the snapshot ids there were before, when given)."""
    t = warehouse.table(table)
    return [d.format().toString() for s in t.snapshots() if after is None or s.snapshotId() not in after
            for d in s.addedDeleteFiles(t.io()) if d.content().id() == 1]


def assert_deletion_vectors_only(warehouse: Warehouse, table: str, history: bool = True) -> None:
    """A v3 table: every position delete is a deletion vector, in a Puffin file of its own (DuckDB
    1.5.5 misread a table whose vectors shared files), and no data file has two live ones. With
    ``history``, every snapshot is still there to say so of every file ever added, and some was."""
    t = warehouse.table(table)
    assert warehouse.spark.jvm.org.apache.iceberg.TableUtil.formatVersion(t) == 3
    if history:
        added = position_deletes_added(warehouse, table)
        assert "PUFFIN" in added and "PARQUET" not in added, sorted(set(added))
    live = warehouse.sql(f"SELECT content, file_format, file_path, referenced_data_file "
                         f"FROM {{c}}.{table}.delete_files WHERE content = 1")
    vectors = [r.referenced_data_file for r in live]
    assert all(r.file_format == "PUFFIN" for r in live)
    assert len(vectors) == len(set(vectors)), "a data file has two live deletion vectors"
    assert max(Counter(r.file_path for r in live).values(), default=1) == 1, "a Puffin file holds two vectors"
