"""Many tables in one daemon: one table per topic, beside one table for the same records.

Creates ``--topics`` topics (``tt.t0000`` ...), one partition each, with ``--per-topic`` JSON records
each, on the bundled broker. Each record names its topic's table in a ``table`` field. Then, in this
one run:

* **one table** (the baseline): the same total of records in one 4-partition topic, into one table;
* **many tables**: one connector, ``topics.regex=tt\\..*``, each topic into its own table, started as a
  user starts it (``tabletopic standalone``), routed by ``--routing``:

  * ``table-topic``: Table Topic mode (``tabletopic.table-topic.enabled=true``);
  * ``static``: ``iceberg.tables`` naming every table, each with a ``route-regex`` on ``table``;
  * ``dynamic``: ``iceberg.tables.dynamic-enabled=true`` on ``table``;

each timed from "partitions assigned" until the tables' commits hold every record. Then:

* **where a round's time goes**: the daemon's stage counters (``/metrics``) per round during the
  backlog, and from its commit events, barrier-to-snapshot seconds and the table commits' seconds;
* **quiet**: the CPU of the daemon and the broker over an interval with no records;
* **freshness**: one new record on every topic, and the time until every table holds its record; then
  again, sent 0.3 s after a round began, so that the records wait a whole interval for the next (the
  worst phase);
* **a trickle** (``--trickle-s``): one record per topic per second, and whether every round kept up;
* **metadata**: the largest current ``metadata.json`` and snapshot summary of any table;
* the CPU-seconds of the backlog and of the freshness round, by kind of thread (Python's, the JVM's
  executors, compilers, GC), and the broker's beside them;
* the peak RSS of the process tree.

    python bench/many_tables.py [--topics 200] [--per-topic 500] [--interval-ms 5000]
                                [--routing table-topic|static|dynamic] [--trickle-s 600]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from e2e_throughput import (
    PARTITIONS,
    Trace,
    cli_daemon,
    cpu_seconds_of,
    json_events,
    record,
    send,
    tabletopic_run,
    thread_cpu,
)
from tabletopic.demo.broker import EmbeddedBroker, create_topic, stop_process
from tabletopic.route.router import topic_table

ONE_TOPIC = "one_table"


async def create_topics(bootstrap: str, names: list[str]) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        for i in range(0, len(names), 100):
            await admin.create_topics([NewTopic(n, 1, 1) for n in names[i:i + 100]])
    finally:
        await admin.close()


def table_of(topic: str, routing: str) -> str:
    """The table a topic's records go to: in Table Topic mode the daemon's own name for it, else ``tt.tNNNN``."""
    return topic_table("tt", topic) if routing == "table-topic" else topic.lower()


def produce(bootstrap: str, placements: list[tuple[str, int]], start: int, routing: str = "table-topic") -> None:
    """One record per (topic, partition) given, ids from ``start``, each naming its table."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "queue.buffering.max.messages": 1_000_000})
    rng = random.Random(start)
    for i, (topic, partition) in enumerate(placements):
        body = record(start + i, rng)
        send(producer, topic, body[:-1] + f',"table":"{table_of(topic, routing)}"}}'.encode(), partition)
    if producer.flush(120):
        raise RuntimeError("records still unsent after 120 s")


def routing_settings(routing: str, names: list[str]) -> dict[str, str]:
    if routing == "table-topic":
        return {"tabletopic.table-topic.enabled": "true", "tabletopic.table-topic.namespace": "tt"}
    if routing == "dynamic":
        return {"iceberg.tables.dynamic-enabled": "true", "iceberg.tables.route-field": "table"}
    tables = [table_of(n, routing) for n in names]
    return {"iceberg.tables": ",".join(tables), "iceberg.tables.route-field": "table",
            **{f"iceberg.table.{t}.route-regex": re.escape(t) for t in tables}}


class Daemon(threading.Thread):
    """``tabletopic standalone`` in Table Topic mode, its JSON log read as it comes."""

    def __init__(self, bootstrap: str, work: Path, interval_ms: int, topics: int, settings: dict[str, str],
                 worker: dict[str, str]) -> None:
        super().__init__(daemon=True)
        self.dir = work / "many-tables"
        self.dir.mkdir()
        self.warehouse = self.dir / "warehouse"
        self.topics = topics
        self.proc = cli_daemon(self.dir, bootstrap, interval_ms, {"name": "many", "topics.regex": r"tt\\..*",
                                                                 **settings}, worker)
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

    def next_round_start(self, interval_s: float) -> float:
        """When (``time.monotonic()``) the next round starts, if the last round that committed a table (its
        commit, less its round seconds) took less than an interval: rounds start every interval, counted
        from the start of the one before."""
        with self.lock:
            last = max(when - round_s for when, _, _, round_s, _ in self.commits)
        now = time.monotonic()
        return last + math.ceil((now - last) / interval_s) * interval_s

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

    def metrics(self) -> dict[str, float]:
        """The daemon's stage seconds (``stage:<name>``, wall) and rounds run, from its /metrics."""
        listener = re.search(r"^listeners=(\S+)", (self.dir / "worker.properties").read_text(), re.M)
        assert listener is not None
        with urllib.request.urlopen(listener.group(1) + "/metrics", timeout=30) as response:
            text = response.read().decode()
        out: dict[str, float] = {}
        for line in text.splitlines():
            stage = re.match(r'tabletopic_stage_seconds_total\{.*stage="([^"]+)".*\} (\S+)', line)
            if stage:
                out[f"stage:{stage.group(1)}"] = out.get(f"stage:{stage.group(1)}", 0.0) + float(stage.group(2))
            elif line.startswith("tabletopic_rounds_total{"):
                out["rounds"] = out.get("rounds", 0.0) + float(line.rsplit(" ", 1)[1])
        return out


def metadata_sizes(warehouse: Path) -> tuple[int, int, int]:
    """The largest current metadata.json of any table, the largest snapshot summary (as JSON) in
    them, and the most snapshots one holds."""
    largest_file = largest_summary = most = 0
    for hint in warehouse.rglob("version-hint.text"):
        path = hint.parent / f"v{hint.read_text().strip()}.metadata.json"
        largest_file = max(largest_file, path.stat().st_size)
        snapshots = json.loads(path.read_text()).get("snapshots", [])
        most = max(most, len(snapshots))
        for snapshot in snapshots:
            largest_summary = max(largest_summary, len(json.dumps(snapshot.get("summary", {}))))
    return largest_file, largest_summary, most


def py_spy(pid: int, path: str | None, gil: bool) -> subprocess.Popen[bytes] | None:
    """py-spy recording ``pid`` into ``path`` (raw): every thread, waiting ones too, or with ``gil`` only the
    thread holding the interpreter's lock (where Python's CPU goes); None without a path."""
    if not path:
        return None
    return subprocess.Popen(["py-spy", "record", "--pid", str(pid), "--threads", "--gil" if gil else "--idle",
                             "--format", "raw", "--rate", "50", "-o", path],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stop_py_spy(profiler: subprocess.Popen[bytes] | None) -> None:
    if profiler is not None:
        profiler.send_signal(signal.SIGINT)  # py-spy writes its profile on SIGINT
        profiler.wait(timeout=60)


def process_cpu(pid: int | None) -> float:
    """CPU-seconds of one process, all its threads (0 without one)."""
    return cpu_seconds_of(Path(f"/proc/{pid}/stat")) if pid is not None else 0.0


def by_kind(cpu: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.1f}" for k, v in sorted(cpu.items(), key=lambda kv: -kv[1])[:8])


def trickle(bootstrap: str, names: list[str], seconds: int, start: int, routing: str) -> int:
    """One record per topic per second for ``seconds``; returns how many were sent."""
    began = time.monotonic()
    for second in range(seconds):
        produce(bootstrap, [(n, 0) for n in names], start + second * len(names), routing)
        time.sleep(max(0.0, began + second + 1 - time.monotonic()))
    return seconds * len(names)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topics", type=int, default=200)
    parser.add_argument("--per-topic", type=int, default=500)
    parser.add_argument("--interval-ms", type=int, default=5000)
    parser.add_argument("--routing", choices=("table-topic", "static", "dynamic"), default="table-topic")
    parser.add_argument("--trickle-s", type=int, default=0,
                        help="then send one record per topic per second for this long, and measure the metadata")
    parser.add_argument("--connector", action="append", default=[], metavar="KEY=VALUE",
                        help="a connector setting for the Table Topic run (repeat): to try one's effect")
    parser.add_argument("--worker", action="append", default=[], metavar="KEY=VALUE",
                        help="a worker setting of the many-tables daemon (say, spark.driver.extraJavaOptions for JFR)")
    parser.add_argument("--py-spy", help="record the daemon's Python threads with py-spy (raw) over the backlog, "
                        "into this file, and over the freshness round into this file with .fresh added")
    parser.add_argument("--py-spy-gil", action="store_true",
                        help="with --py-spy, record only the thread holding the interpreter's lock")
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
            produce(bootstrap, [(n, 0) for n in names for _ in range(args.per_topic)], 0, args.routing)
            produce(bootstrap, [(ONE_TOPIC, i % PARTITIONS) for i in range(total)], 0)
            one = tabletopic_run(bootstrap, work, "one-table", total, args.interval_ms, ONE_TOPIC)
            settings = {**routing_settings(args.routing, names), **dict(kv.split("=", 1) for kv in args.connector)}
            daemon = Daemon(bootstrap, work, args.interval_ms, args.topics, settings,
                            dict(kv.split("=", 1) for kv in args.worker))
            daemon.start()
            try:
                started = daemon.wait_for("every partition assigned", time.monotonic() + 600,
                                          lambda: daemon.assigned_at is not None)
                cpu_before, broker_before = thread_cpu(daemon.proc.pid), process_cpu(broker.pid)
                profiler = py_spy(daemon.proc.pid, args.py_spy, args.py_spy_gil)
                ended = daemon.wait_for("the backlog", time.monotonic() + 1800,
                                        lambda: daemon.committed()[0] >= total)
                stop_py_spy(profiler)
                cpu_backlog = {k: v - cpu_before.get(k, 0.0) for k, v in thread_cpu(daemon.proc.pid).items()}
                broker_backlog = process_cpu(broker.pid) - broker_before
                backlog_s = ended - started
                rounds_backlog = list(daemon.commits)
                stages = daemon.metrics()
                time.sleep(args.interval_ms / 1000)  # the backlog's last round ends
                quiet_s = args.interval_ms / 1000  # then a quiet interval: what idle topics cost
                cpu_before, broker_before = thread_cpu(daemon.proc.pid), process_cpu(broker.pid)
                time.sleep(quiet_s)
                cpu_quiet = sum(thread_cpu(daemon.proc.pid).values()) - sum(cpu_before.values())
                broker_quiet = process_cpu(broker.pid) - broker_before
                since = time.monotonic()
                cpu_before, broker_before = thread_cpu(daemon.proc.pid), process_cpu(broker.pid)
                profiler = py_spy(daemon.proc.pid, args.py_spy and args.py_spy + ".fresh", args.py_spy_gil)
                produce(bootstrap, [(n, 0) for n in names], total, args.routing)
                fresh_at = daemon.wait_for("one new record in every table", time.monotonic() + 1800,
                                           lambda: len(daemon.committed(since)[1]) >= args.topics)
                stop_py_spy(profiler)
                freshness = fresh_at - since
                cpu_fresh = {k: v - cpu_before.get(k, 0.0) for k, v in thread_cpu(daemon.proc.pid).items()}
                broker_fresh = process_cpu(broker.pid) - broker_before
                # The worst phase: one new record on every topic sent just after a round began, so
                # that it waits a whole interval for the next one. A round that ran past the interval
                # moves the rounds after it, and a round without records logs nothing: first a record
                # on one topic, whose short round sets when the next ones start.
                since = time.monotonic()
                produce(bootstrap, [(names[0], 0)], total + args.topics, args.routing)
                daemon.wait_for("a record in one table", time.monotonic() + 600,
                                lambda: len(daemon.committed(since)[1]) >= 1)
                time.sleep(max(0.0, daemon.next_round_start(args.interval_ms / 1000) + 0.3 - time.monotonic()))
                since = time.monotonic()
                produce(bootstrap, [(n, 0) for n in names], total + args.topics + 1, args.routing)
                worst_at = daemon.wait_for("one new record in every table, sent after a round began",
                                           time.monotonic() + 1800,
                                           lambda: len(daemon.committed(since)[1]) >= args.topics)
                freshness_worst = worst_at - since
                trickled, behind_s = 0, 0.0
                if args.trickle_s:
                    since = time.monotonic()
                    trickled = trickle(bootstrap, names, args.trickle_s, total + 2 * args.topics + 1, args.routing)
                    trickle_end = time.monotonic()
                    caught_up = daemon.wait_for("the trickle", time.monotonic() + 1800,
                                                lambda: daemon.committed(since)[0] >= trickled)
                    behind_s = caught_up - trickle_end
            finally:
                daemon.stop()
            largest_file, largest_summary, most_snapshots = metadata_sizes(daemon.warehouse)
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
    print(f"{args.routing} routing, {args.topics} tables: {total / backlog_s:,.0f} records/s ({backlog_s:.1f} s) = "
          f"{one.seconds / backlog_s:.2f} of one table")
    print(f"freshness: one new record on every topic in its table after {freshness:.1f} s "
          f"= {freshness / interval:.1f} commit intervals; sent 0.3 s after a round began (the worst phase) "
          f"{freshness_worst:.1f} s = {freshness_worst / interval:.1f} intervals")
    if round_s:
        print(f"table commits during the backlog: {len(round_s)}, barrier to snapshot median "
              f"{statistics.median(round_s):.1f} s, max {max(round_s):.1f} s; commit seconds median "
              f"{statistics.median(commit_s):.2f}, sum {sum(commit_s):.1f}")
    print(f"CPU-seconds during the backlog: {sum(cpu_backlog.values()):.1f}, the broker {broker_backlog:.1f}; "
          f"by thread kind: {by_kind(cpu_backlog)}")
    print(f"quiet: the daemon {cpu_quiet / quiet_s:.2f} of a core, the broker {broker_quiet / quiet_s:.2f}, "
          f"over one interval with no records")
    jvm_fresh = sum(v for k, v in cpu_fresh.items() if k.startswith("jvm: "))
    print(f"CPU-seconds of the freshness round: {sum(cpu_fresh.values()):.1f}, the broker {broker_fresh:.1f}; "
          f"the JVM's {jvm_fresh * 1000 / args.topics:.1f} ms a table; by thread kind: {by_kind(cpu_fresh)}")
    rounds = stages.pop("rounds", 0.0)
    if rounds:
        print(f"per round during the backlog ({rounds:.0f} rounds), stage seconds: " + ", ".join(
            f"{k.split(':', 1)[1]} {v / rounds:.2f}" for k, v in sorted(stages.items())))
    if args.trickle_s:
        print(f"trickle: {trickled:,} records over {args.trickle_s} s (1 per topic per second); the last in its "
              f"table {behind_s:.1f} s after it was sent ({behind_s / interval:.1f} intervals)")
    print(f"largest current metadata.json {largest_file / 1024:.1f} KiB, largest snapshot summary in one "
          f"{largest_summary:,} B, most snapshots in one table {most_snapshots}")
    print(f"peak RSS of the process tree {daemon.trace.peak_rss:,.0f} MiB "
          f"(the Python process alone {daemon.trace.peak_python_rss:,.0f} MiB)")


if __name__ == "__main__":
    main()
