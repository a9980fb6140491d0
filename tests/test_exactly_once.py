"""End to end through the broker: two topics, two tables, SIGKILL twice, every record exactly once."""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tabletopic.connectors import parts
from tabletopic.offsets.source_offsets import Recorded, offsets_key, round_start_key
from tabletopic.task.sink_task import SinkTask
from tabletopic.write.spark_session import SparkRuntime
from tabletopic.write.table_committer import CommitFailed, CommitResult, TableCommitter
from tests.connect_json import json_envelope
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

PARTITIONS = 4
WAVES = 5
PER_WAVE = 5_000  # per topic: 2 topics x 5 waves x 5,000 = 50,000 records
DAY_MS = 86_400_000
BASE_MS = 1_790_000_000_000

SCHEMA = {"type": "struct", "name": "event", "optional": False, "fields": [
    {"field": "id", "type": "int64", "optional": False},
    {"field": "kind", "type": "string", "optional": False},
    {"field": "ts", "type": "int64", "name": "org.apache.kafka.connect.data.Timestamp", "optional": False},
    {"field": "amount", "type": "int64", "optional": True},
    {"field": "h", "type": "int64", "optional": True},
]}


class Stream:
    """Records produced so far, and what each table must end up holding."""

    def __init__(self, bootstrap: str, topic: str, enveloped: bool, first_id: int, seed: int) -> None:
        self.bootstrap, self.topic, self.enveloped = bootstrap, topic, enveloped
        self.next_id = first_id
        self.rng = random.Random(seed)
        self.per_partition: Counter[int] = Counter()
        self.expected: dict[str, list[dict[str, Any]]] = {"web": [], "app": []}

    def wave(self, n: int) -> None:
        batch = []
        for _ in range(n):
            row = {"id": self.next_id, "kind": self.rng.choice(["web", "app"]),
                   "ts": BASE_MS + self.rng.randrange(10 * DAY_MS), "amount": self.rng.randrange(10**6),
                   "h": self.rng.randrange(2**31)}
            self.next_id += 1
            self.expected[row["kind"]].append(row)
            partition = row["id"] % PARTITIONS
            self.per_partition[partition] += 1
            if self.enveloped:
                value = json_envelope(SCHEMA, row)
            else:
                iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(row["ts"] / 1000)) + \
                    f".{row['ts'] % 1000:03d}Z"
                value = json.dumps({**row, "ts": iso}).encode()
            batch.append((str(row["id"]).encode(), value, partition))
        produce(self.bootstrap, self.topic, batch)


def _aggregates(rows: list[dict[str, Any]]) -> tuple[int, int, int, int, int]:
    return (len(rows), len({r["id"] for r in rows}), sum(r["h"] for r in rows), sum(r["amount"] for r in rows),
            sum(r["ts"] // 1000 for r in rows))


@pytest.mark.timeout(420)
@pytest.mark.slow
def test_two_topics_two_tables_survive_two_sigkills(bootstrap: str, warehouse: Warehouse, tmp_path: Path) -> None:
    schema_topic, plain_topic = unique("events_schema"), unique("events_plain")
    for topic in (schema_topic, plain_topic):
        create_topic(bootstrap, topic, PARTITIONS)
    tables = {"web": "shop.events_web", "app": "shop.events_app"}
    common = {
        "iceberg.tables": ",".join(tables.values()),
        "iceberg.tables.route-field": "kind",
        f"iceberg.table.{tables['web']}.route-regex": "web",
        f"iceberg.table.{tables['app']}.route-regex": "app",
        "iceberg.tables.auto-create-enabled": "true",
        "iceberg.tables.default-partition-by": "day(ts)",
        "iceberg.control.commit.interval-ms": "2000",
        **warehouse.connector_props(),
    }
    connectors = [
        {"name": unique("with-schema"), "topics": schema_topic,
         "value.converter.schemas.enable": "true", **common},
        {"name": unique("schemaless"), "topics": plain_topic,
         "value.converter.schemas.enable": "false", **common},
    ]
    groups = [f"connect-{c['name']}" for c in connectors]
    streams = [Stream(bootstrap, schema_topic, True, 0, 1), Stream(bootstrap, plain_topic, False, 10**6, 2)]
    daemon = DaemonProcess(tmp_path, worker_props(bootstrap), connectors)

    def committed(group: str) -> int:
        best: dict[tuple[str, int], int] = {}
        for table in tables.values():
            for tp, offset in warehouse.offsets(table, group).items():
                best[tp] = max(best.get(tp, 0), offset)
        return sum(best.values())

    def total_committed() -> int:
        return sum(committed(g) for g in groups)

    # Run 1: killed with a wave consumed but (at least partly) not committed.
    daemon.start()
    for s in streams:
        s.wave(PER_WAVE)
    wait_until(lambda: total_committed() > 0, 120, "a first commit", daemon)
    for s in streams:
        s.wave(PER_WAVE)
    time.sleep(1.5)
    daemon.kill()
    after_first_kill = total_committed()

    # Run 2: restarted from the tables' offsets, killed again mid-stream.
    daemon.start()
    for s in streams:
        s.wave(PER_WAVE)
    wait_until(lambda: total_committed() > after_first_kill, 120, "commits after the first restart", daemon)
    time.sleep(random.Random(3).uniform(0.2, 1.5))
    daemon.kill()

    # Run 3: the rest of the stream, then a graceful stop.
    daemon.start()
    for _ in range(WAVES - 3):
        for s in streams:
            s.wave(PER_WAVE)
    produced = sum(sum(s.per_partition.values()) for s in streams)
    assert produced == 2 * WAVES * PER_WAVE
    wait_until(lambda: total_committed() == produced, 180, "every offset committed", daemon)
    assert daemon.terminate() == 0, daemon.output()[-3000:]
    assert "positions from the tables" in daemon.output()

    con = duckdb_connection()
    for kind, table in tables.items():
        warehouse.assert_intact(table)
        expected = [r for s in streams for r in s.expected[kind]]
        want = _aggregates(expected)
        spark_row = warehouse.sql(
            f"SELECT count(*), count(DISTINCT id), sum(h), sum(amount), sum(unix_timestamp(ts)) FROM {{c}}.{table}")[0]
        assert tuple(int(v) for v in spark_row) == want, f"{table} read by Spark"
        duck_row = con.execute(
            f"SELECT count(*), count(DISTINCT id), sum(h), sum(amount), sum(epoch_ms(ts) // 1000) "
            f"FROM iceberg_scan('{warehouse.location(table)}')").fetchone()
        assert tuple(int(v) for v in duck_row) == want, f"{table} read by DuckDB"
        kinds = warehouse.sql(f"SELECT DISTINCT kind FROM {{c}}.{table}")
        assert [r[0] for r in kinds] == [kind]

        spec = warehouse.table(table).spec()
        assert [f.transform().toString() for f in spec.fields()] == ["day"]
        for snapshot in warehouse.snapshots(table):
            assert any(k.startswith("kafka.connect.source-offsets.") for k in snapshot["summary"]), snapshot
        final = warehouse.snapshots(table)[-1]["summary"]
        assert offsets_key(groups[0]) in final or offsets_key(groups[1]) in final


def test_a_round_cut_between_its_two_tables_loses_no_row_of_the_second(
        bootstrap: str, spark: SparkRuntime, warehouse: Warehouse, monkeypatch: pytest.MonkeyPatch) -> None:
    """One table takes the round and the other's commit fails, as when the daemon dies between them.

    The group has no offsets yet (it is committed only after a round every table took), and the
    second table records none: only where the first table's round began says where its rows begin.
    New records reach the worker while it reads its positions again, and must wait for them.
    """
    topic, tables = unique("cut"), {"web": "cut.web", "app": "cut.app"}
    create_topic(bootstrap, topic, 2)
    kinds = {i: ("web", "app")[i % 3 == 0] for i in range(660)}

    def records(ids: range) -> list[tuple[bytes, bytes, int]]:
        return [(str(i).encode(), json.dumps({"id": i, "kind": kinds[i]}).encode(), i % 2) for i in ids]

    produce(bootstrap, topic, records(range(600)))
    connector = connector_props("cut", topic, ",".join(tables.values()), warehouse, {
        "value.converter.schemas.enable": "false", "iceberg.tables.route-field": "kind",
        f"iceberg.table.{tables['web']}.route-regex": "web", f"iceberg.table.{tables['app']}.route-regex": "app",
        "iceberg.tables.auto-create-enabled": "true", "iceberg.control.commit.interval-ms": "1500"})
    real_commit, real_reader, real_ingest = TableCommitter.commit, parts.table_reader, SinkTask.ingest
    cut, arrived, more_sent = threading.Event(), threading.Event(), threading.Event()

    def commit(self: TableCommitter, handle: Any, files: Any, *args: Any, **kwargs: Any) -> CommitResult:
        if handle.name == tables["web"] and files is not None and not cut.is_set():
            cut.set()
            raise CommitFailed("injected: the daemon died before this table's snapshot")
        return real_commit(self, handle, files, *args, **kwargs)

    def table_reader(tables_: Any, group_id: str) -> Callable[[str], Recorded]:
        real_read = real_reader(tables_, group_id)

        def read_table(table: str) -> Recorded:
            if cut.is_set() and not more_sent.is_set() and threading.current_thread() is not threading.main_thread():
                # The worker reads its positions again after the rejected round (in a thread, unlike a
                # first floor read): new records reach it meanwhile, before any seek, and must not be
                # taken from where the consumer stands.
                more_sent.set()
                produce(bootstrap, topic, records(range(600, 660)))
                arrived.wait(60)
            return real_read(table)
        return read_table

    async def ingest(self: SinkTask, raw: Any) -> None:
        if raw.next_offset > 300:  # 600 records over two partitions: only the later ones go past
            arrived.set()
        await real_ingest(self, raw)

    monkeypatch.setattr(TableCommitter, "commit", commit)
    monkeypatch.setattr(parts, "table_reader", table_reader)
    monkeypatch.setattr(SinkTask, "ingest", ingest)

    def done(daemon: Any) -> bool:
        task = daemon.connectors[0].task
        return all(sum(task.committed_offsets(t).values()) == len(kinds) for t in tables.values())

    code, daemon = run_in_process(spark, worker_props(bootstrap), [connector], until=done, timeout=180)
    assert arrived.is_set(), "no record arrived while the positions were read again"
    assert code == 0 and cut.is_set(), "the web table's first commit was never cut"
    for kind, table in tables.items():
        ids = sorted(r.id for r in warehouse.rows(table, "id"))
        assert ids == [i for i, k in kinds.items() if k == kind], f"{table}: rows lost or written twice"
    group = f"connect-{connector['name']}"
    first_app = next(s["summary"] for s in warehouse.snapshots(tables["app"]) if offsets_key(group) in s["summary"])
    assert round_start_key(group) in first_app
    labels = {"connector": connector["name"], "table": tables["web"]}
    assert daemon.registry.get_sample_value("tabletopic_commit_failures_total", labels) == 1
