"""The soak: a sustained rate for half an hour with maintenance on; does anything creep?

``tabletopic standalone`` runs, as a user starts it, two connectors into a hadoop catalog on local
files, with table maintenance on (a look every ``--maintenance-interval-ms``, by default the product's
10 minutes; snapshots expired after 5 minutes):

- an append connector fed ``--rate`` records/s (default 150,000, the highest sustained rate
  ``bench/e2e_throughput.py --sustained`` holds), the same JSON records as that bench;
- an upsert connector fed ``--upsert-rate`` changes/s (default 1,000) over 20,000 keys, so that the
  looks convert equality deletes and compact.

Each topic is produced by librdkafka in a process of its own, gzip-compressed: the bundled broker keeps
every record in memory and has no retention, and half an hour at 150,000 records/s is 36 GB
uncompressed. Every 10 s the bench samples the RSS of the daemon's Python process and of its JVM, and
from the daemon's /metrics the lag (``tabletopic_committed_lag_records``: records in each topic and not
yet in its table, as a dashboard shows it) and the tables' data file, delete file and snapshot counts.
It prints a line a minute, then:

- the growth of each over the last ``--judge-minutes`` (default 20): a least-squares slope, and the
  means of that span's first and last quarter;
- commit latency (round start to snapshot) p50 and p99, per table;
- every record landed, each once: DuckDB counts the append table's ids once the producers stop.

There is no peer to run beside a half hour of this on two cores; the figures stand against the same
run's own start (``--judge-minutes`` leaves the first minutes out: the JVM compiles and the tables
fill their first snapshots there).

    python bench/soak.py [--minutes 30] [--rate 150000] [--upsert-rate 1000] [--maintenance-interval-ms 600000]
                         [--keep]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the tests' scrape

from tests.support import scrape

from e2e_throughput import PARTITIONS, java_child, json_events, paced, record, rss_mib, write_props
from tabletopic.demo.broker import EmbeddedBroker, create_topic, free_port, stop_process
from tabletopic.demo.lake_servers import duckdb_offline

APPEND, UPSERT = "soak.events", "soak.accounts"
KEYS = 20_000
SAMPLE_S = 10


def _producer(bootstrap: str, topic: str, rate: int, seconds: float, upsert: bool, sent: Any) -> None:
    """``rate`` records/s for ``seconds``, gzip-compressed, in a process of its own (librdkafka)."""
    from confluent_kafka import Producer

    rng = random.Random(11 if upsert else 7)
    if upsert:
        # The key's own value: the table must end with each key's last value.
        values = [(str(k).encode(), json.dumps({"id": k, "balance": i}).encode(), k % PARTITIONS)
                  for i, k in enumerate(rng.randrange(KEYS) for _ in range(4096))]
    else:
        values = [(None, record(i, rng), i % PARTITIONS) for i in range(4096)]
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.num.messages": 10000,
                         "queue.buffering.max.messages": 1_000_000, "compression.type": "gzip",
                         "compression.level": 1, "acks": 1})

    def record_at(i: int) -> tuple[bytes | None, bytes, int]:
        key, value, partition = values[i % len(values)]
        if not upsert:  # every append record its own id: the table must hold each once
            value = b'{"id":%d,' % i + value.split(b",", 1)[1]
        return key, value, partition
    paced(producer, topic, rate, seconds, record_at, sent, flush_s=120)


class Commits(threading.Thread):
    """The daemon's JSON log as it comes: records committed and each round's seconds, per table."""

    def __init__(self, proc: subprocess.Popen[bytes], log_path: Path) -> None:
        super().__init__(daemon=True)
        self.proc, self.log_path = proc, log_path
        self.assigned = threading.Event()
        self.records: dict[str, int] = {APPEND: 0, UPSERT: 0}
        self.rounds: dict[str, list[tuple[float, float]]] = {APPEND: [], UPSERT: []}  # (when, seconds)
        self.maintained: list[tuple[str, float, int]] = []  # (table, seconds, bytes rewritten) of each run

    def run(self) -> None:
        assert self.proc.stdout is not None
        with open(self.log_path, "wb") as log:
            for event in json_events(self.proc.stdout, log):
                name, table = event.get("event"), event.get("table")
                if name == "partitions assigned" and event.get("partitions"):
                    self.assigned.set()
                elif name == "committed" and table in self.records:
                    self.records[table] += int(event.get("records", 0))
                    self.rounds[table].append((time.monotonic(), float(event.get("round_seconds", 0.0))))
                elif name == "maintained":
                    self.maintained.append((str(table), float(event.get("seconds", 0.0)),
                                            int(event.get("rewritten_bytes", 0))))


def _gauges(port: int) -> dict[str, float]:
    """Lag per topic, and data files, delete files and snapshots per table, from the daemon's /metrics."""
    try:
        _, samples = scrape(port)
    except OSError:
        return {}
    out: dict[str, float] = {}
    wanted = {"tabletopic_table_data_files": "files", "tabletopic_table_delete_files": "deletes",
              "tabletopic_table_snapshots": "snapshots"}
    for (name, labels), value in samples.items():
        label = dict(labels)
        if name == "tabletopic_committed_lag_records":
            key = f"lag {label.get('topic', '')}"
            out[key] = out.get(key, 0.0) + value
        if name in wanted:
            out[f"{wanted[name]} {label.get('table', '').split('.')[-1]}"] = value
    return out


def _slope(points: list[tuple[float, float]]) -> float:
    """Least-squares growth per minute of (minute, value) points."""
    if len(points) < 2:
        return 0.0
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.mean(xs), statistics.mean(ys)
    var = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in points) / var if var else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--rate", type=int, default=150_000)
    parser.add_argument("--upsert-rate", type=int, default=1_000)
    parser.add_argument("--interval-ms", type=int, default=2_000)
    parser.add_argument("--judge-minutes", type=float, default=20.0)
    parser.add_argument("--maintenance-interval-ms", type=int, default=600_000)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="soak-"))
    try:
        with EmbeddedBroker(log_path=work / "broker.log") as broker:
            return _soak(args, work, broker)
    finally:
        if args.keep:
            print(f"kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def _soak(args: argparse.Namespace, work: Path, broker: EmbeddedBroker) -> int:
    bootstrap = broker.bootstrap_servers
    for topic in ("soak_events", "soak_accounts"):
        asyncio.run(create_topic(bootstrap, topic, PARTITIONS))
    port = free_port()
    common = {"iceberg.tables.auto-create-enabled": "true", "iceberg.control.commit.interval-ms": str(args.interval_ms),
              "iceberg.catalog": "local", "iceberg.catalog.type": "hadoop",
              "iceberg.catalog.warehouse": "file://" + str(work / "warehouse"),
              "tabletopic.maintenance.enabled": "true",
              "tabletopic.maintenance.interval-ms": str(args.maintenance_interval_ms),
              "tabletopic.maintenance.snapshots.older-than-ms": "300000",
              "tabletopic.maintenance.orphans.interval-ms": "600000"}
    write_props(work / "worker.properties", {
        "bootstrap.servers": bootstrap, "listeners": f"http://127.0.0.1:{port}", "log.format": "json",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter", "value.converter.schemas.enable": "false",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter"})
    write_props(work / "append.properties", {"name": "soak-append", "topics": "soak_events",
                                              "iceberg.tables": APPEND, **common})
    write_props(work / "upsert.properties", {"name": "soak-upsert", "topics": "soak_accounts",
                                              "iceberg.tables": UPSERT, "iceberg.tables.upsert-mode-enabled": "true",
                                              "iceberg.tables.default-id-columns": "id", **common})
    proc = subprocess.Popen([sys.executable, "-m", "tabletopic.cli", "standalone", str(work / "worker.properties"),
                             str(work / "append.properties"), str(work / "upsert.properties")], cwd=work,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    commits = Commits(proc, work / "output.log")
    commits.start()
    try:
        if not commits.assigned.wait(180):
            print(f"no partitions assigned; see {work / 'output.log'}")
            return 1
        return _run(args, work, proc, commits, bootstrap, port, broker)
    finally:
        stop_process(proc, grace_s=180)


def _run(args: argparse.Namespace, work: Path, proc: subprocess.Popen[bytes], commits: Commits, bootstrap: str,
         port: int, broker: EmbeddedBroker) -> int:
    seconds = args.minutes * 60
    sent = {APPEND: multiprocessing.Value("q", 0), UPSERT: multiprocessing.Value("q", 0)}
    producers = [multiprocessing.Process(target=_producer, args=(bootstrap, topic, rate, seconds, table == UPSERT,
                                                                  sent[table]))
                 for table, topic, rate in ((APPEND, "soak_events", args.rate),
                                            (UPSERT, "soak_accounts", args.upsert_rate))]
    for p in producers:
        p.start()
    began = time.monotonic()
    jvm = java_child(proc.pid)
    samples: list[dict[str, float]] = []
    print(f"{'min':>5} {'python MiB':>10} {'jvm MiB':>8} {'broker MiB':>10} {'lag events':>11} {'lag accounts':>12}  "
          "files, deletes and snapshots", flush=True)
    while any(p.is_alive() for p in producers) and proc.poll() is None:
        time.sleep(SAMPLE_S)
        minute = (time.monotonic() - began) / 60
        sample = {"minute": minute, "python": rss_mib(proc.pid), "jvm": rss_mib(jvm) if jvm else 0.0,
                  "broker": rss_mib(broker.pid) if broker.pid else 0.0, **_gauges(port)}
        samples.append(sample)
        if len(samples) % (60 // SAMPLE_S) == 0:
            tables = ", ".join(f"{k} {v:g}" for k, v in sorted(sample.items()) if k.split()[0] in
                               ("files", "deletes", "snapshots"))
            print(f"{minute:5.1f} {sample['python']:10,.0f} {sample['jvm']:8,.0f} {sample['broker']:10,.0f} "
                  f"{sample.get('lag soak_events', -1):11,.0f} {sample.get('lag soak_accounts', -1):12,.0f}  {tables}",
                  flush=True)
    for p in producers:
        p.join(300)
    total = {table: value.value for table, value in sent.items()}
    deadline = time.monotonic() + 300
    while commits.records[APPEND] < total[APPEND] and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(1)
    produced_rate = total[APPEND] / seconds
    print(f"\n{args.minutes:g} minutes at {args.rate:,} records/s asked, {produced_rate:,.0f} produced, into "
          f"{APPEND}, and {args.upsert_rate:,} changes/s into {UPSERT}; commit interval {args.interval_ms} ms; "
          f"{len(commits.maintained)} maintenance runs (the longest "
          f"{max((s for _, s, _ in commits.maintained), default=0):.0f} s); the daemon "
          f"{'alive' if proc.poll() is None else 'EXITED'}")
    for table in (APPEND, UPSERT):  # whether the looks' cost stays flat or grows with the table
        runs = [f"{s:.0f} s/{b / 2**20:,.0f} MiB" for t, s, b in commits.maintained if t == table]
        print(f"maintenance of {table}, each run (seconds/bytes rewritten): {', '.join(runs) or 'none'}")
    judged = [s for s in samples if s["minute"] >= args.minutes - args.judge_minutes]
    quarter = max(1, len(judged) // 4)
    print(f"over the last {args.judge_minutes:g} minutes ({len(judged)} samples): growth per minute (least "
          "squares), and the mean of the span's first and last quarter")
    for key in sorted({k for s in judged for k in s} - {"minute"}):
        points = [(s["minute"], s[key]) for s in judged if key in s]
        if not points:
            continue
        first = statistics.mean(v for _, v in points[:quarter])
        last = statistics.mean(v for _, v in points[-quarter:])
        print(f"  {key:22} {_slope(points):+12,.1f}/min   {first:14,.0f} -> {last:14,.0f}")
    for table, rounds in commits.rounds.items():
        latencies = sorted(s for when, s in rounds if when - began >= (args.minutes - args.judge_minutes) * 60)
        if latencies:
            p50, p99 = (latencies[min(len(latencies) - 1, int(q * len(latencies)))] for q in (0.5, 0.99))
            print(f"commit latency {table}: p50 {p50:.2f} s, p99 {p99:.2f} s over {len(latencies)} commits")
    rows, ids = _count(work / "warehouse")
    print(f"append table: {rows:,} rows, {ids:,} distinct ids, {total[APPEND]:,} produced; "
          f"committed per the daemon {commits.records[APPEND]:,}")
    return 0 if rows == ids == total[APPEND] else 1


def _count(warehouse: Path) -> tuple[int, int]:
    con = duckdb_offline("avro", "iceberg")
    path = warehouse / "soak" / "events"
    latest = max((path / "metadata").glob("v*.metadata.json"), key=lambda f: int(f.name[1:].split(".")[0]))
    got = con.execute(f"SELECT count(*), count(DISTINCT id) FROM iceberg_scan('{latest}')").fetchone()
    assert got is not None
    return int(got[0]), int(got[1])


if __name__ == "__main__":
    sys.exit(main())
