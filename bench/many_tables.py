"""Many tables in one daemon: Table Topic mode with one table per topic, beside one table for the same records.

Creates ``--topics`` topics (``tt.t0000`` ...), one partition each, with ``--per-topic`` JSON records
each, on the bundled broker. Then, in this one run:

* **one table** (the baseline): the same total of records in one 4-partition topic, into one table;
* **Table Topic mode**: one connector, ``topics.regex=tt\\..*``, ``tabletopic.table-topic.enabled=true``,
  each topic its own table, started as a user starts it (``tabletopic standalone``);

each timed from "partitions assigned" until the tables' commits hold every record. Then:

* **freshness**: one new record on every topic, and the time until every table holds its record;
* **where a round's time goes**, from the daemon's own commit events: rounds, barrier-to-snapshot
  seconds, and the seconds of the table commits in them;
* **metadata**: the largest ``metadata.json`` and snapshot summary in the warehouse;
* the peak RSS of the process tree.

    python bench/many_tables.py [--topics 200] [--per-topic 500] [--interval-ms 5000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from e2e_throughput import PARTITIONS, Trace, cli_daemon, json_events, record, send, tabletopic_run
from tabletopic.demo.broker import EmbeddedBroker, create_topic, stop_process

ONE_TOPIC = "one_table"


async def create_topics(bootstrap: str, names: list[str]) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        for i in range(0, len(names), 100):
            await admin.create_topics([NewTopic(n, 1, 1) for n in names[i:i + 100]])
    finally:
        await admin.close()


def produce(bootstrap: str, placements: list[tuple[str, int]], start: int) -> None:
    """One record per (topic, partition) given, ids from ``start``."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "queue.buffering.max.messages": 1_000_000})
    rng = random.Random(start)
    for i, (topic, partition) in enumerate(placements):
        send(producer, topic, record(start + i, rng), partition)
    if producer.flush(120):
        raise RuntimeError("records still unsent after 120 s")


class Daemon(threading.Thread):
    """``tabletopic standalone`` in Table Topic mode, its JSON log read as it comes."""

    def __init__(self, bootstrap: str, work: Path, interval_ms: int, topics: int, extra: dict[str, str]) -> None:
        super().__init__(daemon=True)
        self.dir = work / "table-topic"
        self.dir.mkdir()
        self.warehouse = self.dir / "warehouse"
        self.topics = topics
        self.proc = cli_daemon(self.dir, bootstrap, interval_ms, {
            "name": "many", "topics.regex": r"tt\\..*", "tabletopic.table-topic.enabled": "true",
            "tabletopic.table-topic.namespace": "tt", **extra})
        self.trace = Trace(self.proc.pid)
        self.assigned_at: float | None = None
        self.assigned = 0
        self.commits: list[tuple[float, str, int, float, float]] = []  # when, table, records, round s, commit s
        self.lock = threading.Lock()

    def run(self) -> None:
        self.trace.start()
        assert self.proc.stdout is not None
        with open(self.dir / "output.log", "wb") as log:
            for event in json_events(self.proc.stdout, log):
                if event.get("event") == "partitions assigned":
                    self.assigned = max(self.assigned, int(event.get("partitions", 0)))
                    if self.assigned >= self.topics and self.assigned_at is None:
                        self.assigned_at = time.monotonic()
                elif event.get("event") == "committed":
                    with self.lock:
                        self.commits.append((time.monotonic(), str(event.get("table")), int(event.get("records", 0)),
                                             float(event.get("round_seconds", 0.0)),
                                             float(event.get("commit_seconds", 0.0))))

    def committed(self, since: float = 0.0) -> tuple[int, set[str]]:
        with self.lock:
            done = [c for c in self.commits if c[0] >= since and c[2]]
        return sum(c[2] for c in done), {c[1] for c in done}

    def wait_for(self, what: str, until: float, check: Callable[[], bool]) -> float:
        while time.monotonic() < until:
            if check():
                return time.monotonic()
            if self.proc.poll() is not None:
                raise RuntimeError(f"the daemon exited while waiting for {what}; see {self.dir / 'output.log'}")
            time.sleep(0.2)
        raise RuntimeError(f"timed out waiting for {what}; see {self.dir / 'output.log'}")

    def stop(self) -> None:
        self.trace.stopped.set()
        stop_process(self.proc, grace_s=180)


def metadata_sizes(warehouse: Path) -> tuple[int, int]:
    """The largest metadata.json of any table, and the largest snapshot summary (as JSON) in them."""
    largest_file = largest_summary = 0
    for path in warehouse.rglob("*.metadata.json"):
        largest_file = max(largest_file, path.stat().st_size)
        doc = json.loads(path.read_text())
        for snapshot in doc.get("snapshots", []):
            largest_summary = max(largest_summary, len(json.dumps(snapshot.get("summary", {}))))
    return largest_file, largest_summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topics", type=int, default=200)
    parser.add_argument("--per-topic", type=int, default=500)
    parser.add_argument("--interval-ms", type=int, default=5000)
    parser.add_argument("--connector", action="append", default=[], metavar="KEY=VALUE",
                        help="a connector setting for the Table Topic run (repeat): to try one's effect")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (the daemon's output.log)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tabletopic-many-"))
    total = args.topics * args.per_topic
    names = [f"tt.t{i:04d}" for i in range(args.topics)]
    try:
        with EmbeddedBroker(log_path=work / "broker.log") as broker:
            bootstrap = broker.bootstrap_servers
            asyncio.run(create_topics(bootstrap, names))
            asyncio.run(create_topic(bootstrap, ONE_TOPIC, PARTITIONS))
            produce(bootstrap, [(n, 0) for n in names for _ in range(args.per_topic)], 0)
            produce(bootstrap, [(ONE_TOPIC, i % PARTITIONS) for i in range(total)], 0)
            one = tabletopic_run(bootstrap, work, "one-table", total, args.interval_ms, ONE_TOPIC)
            daemon = Daemon(bootstrap, work, args.interval_ms, args.topics,
                            dict(kv.split("=", 1) for kv in args.connector))
            daemon.start()
            try:
                started = daemon.wait_for("every partition assigned", time.monotonic() + 600,
                                          lambda: daemon.assigned_at is not None)
                ended = daemon.wait_for("the backlog", time.monotonic() + 1800,
                                        lambda: daemon.committed()[0] >= total)
                backlog_s = ended - started
                rounds_backlog = list(daemon.commits)
                time.sleep(2 * args.interval_ms / 1000)  # a quiet round or two after the backlog
                since = time.monotonic()
                produce(bootstrap, [(n, 0) for n in names], total)
                fresh_at = daemon.wait_for("one new record in every table", time.monotonic() + 1800,
                                           lambda: len(daemon.committed(since)[1]) >= args.topics)
                freshness = fresh_at - since
            finally:
                daemon.stop()
            largest_file, largest_summary = metadata_sizes(daemon.warehouse)
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    interval = args.interval_ms / 1000
    round_s = [c[3] for c in rounds_backlog]
    commit_s = [c[4] for c in rounds_backlog]
    print(f"\n{args.topics} topics of {args.per_topic} JSON records (1 partition each), {total:,} records, "
          f"commit interval {interval:.0f} s, {os.cpu_count()} cores, broker on the same cores"
          + (f"; connector settings {args.connector}" if args.connector else "") + "\n")
    print(f"one table ({PARTITIONS} partitions, same records): {total / one.seconds:,.0f} records/s "
          f"({one.seconds:.1f} s)")
    print(f"Table Topic mode, {args.topics} tables: {total / backlog_s:,.0f} records/s ({backlog_s:.1f} s) = "
          f"{one.seconds / backlog_s:.2f} of one table")
    print(f"freshness: one new record on every topic in its table after {freshness:.1f} s "
          f"= {freshness / interval:.1f} commit intervals")
    if round_s:
        print(f"table commits during the backlog: {len(round_s)}, barrier to snapshot median "
              f"{statistics.median(round_s):.1f} s, max {max(round_s):.1f} s; commit seconds median "
              f"{statistics.median(commit_s):.2f}, sum {sum(commit_s):.1f}")
    print(f"largest metadata.json {largest_file / 1024:.1f} KiB, largest snapshot summary {largest_summary:,} B")
    print(f"peak RSS of the process tree {daemon.trace.peak_rss:,.0f} MiB")


if __name__ == "__main__":
    main()
