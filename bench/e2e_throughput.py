"""End-to-end throughput: a JSON topic into a committed Iceberg table, beside aiokafka alone.

Produces N JSON records (default 500,000, about 150 bytes each) to a 4-partition topic on the
bundled broker, then measures in this one run:

* **baseline**: aiokafka alone consuming every record (no conversion, no writes);
* **tabletopic** into a hadoop catalog on local files, ``--runs`` times (default 3, the median
  counts), each a new connector reading the whole topic: from the moment the sink owns its
  partitions until every offset is committed to the table. The SparkSession is started and
  warmed up (one write of a small topic) first, as a running daemon's is;
* the **phase breakdown** of the median run, from the daemon's own stage counters
  (``tabletopic_stage_seconds_total``, ``tabletopic_stage_cpu_seconds_total``), beside the CPU
  seconds of the Python process and of the Spark driver JVM over the run;
* unless ``--no-lake``, one more run into S3 on loopback behind an Iceberg REST catalog (SeaweedFS).

With ``--sustained`` it instead produces at a fixed rate while the sink runs, and searches the
highest rate at which the records not yet committed stay bounded for ``--window-s`` (120 s); it
reports that rate, the commit latency p50/p99 (barrier to snapshot, from the daemon's commit log
events) and the peak RSS of the process tree (Python plus JVM).

    python bench/e2e_throughput.py [--records 500000] [--interval-ms 2000] [--runs 3] [--no-lake]
    python bench/e2e_throughput.py --sustained [--window-s 120]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import multiprocessing
import os
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from tabletopic.config.connector import parse_connector
from tabletopic.config.worker import parse_worker
from tabletopic.demo.broker import EmbeddedBroker, create_topic
from tabletopic.demo.lake_servers import SeaweedLake
from tabletopic.observe.logging_setup import configure_logging
from tabletopic.standalone import Standalone
from tabletopic.write.spark_session import SparkRuntime

TOPIC, WARMUP, PARTITIONS, TABLE = "bench_json", "bench_warmup", 4, "bench.events"
STAGES = ("fetch", "take", "convert", "buffer", "handoff", "write", "commit")


def record(i: int, rng: random.Random) -> bytes:
    return json.dumps({
        "id": i, "user": f"user-{rng.randrange(100_000):06d}", "action": rng.choice(["view", "click", "buy"]),
        "amount": round(rng.random() * 1000, 2), "country": rng.choice(["DE", "FR", "US", "JP"]),
        "ts": f"2026-11-{1 + i % 28:02d}T{i % 24:02d}:00:00Z", "session": f"{rng.getrandbits(64):016x}",
    }).encode()


async def produce(bootstrap: str, topic: str, n: int, start: int = 0) -> int:
    await create_topic(bootstrap, topic, PARTITIONS)
    rng = random.Random(start + 1)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=False,
                                linger_ms=20, max_batch_size=512 * 1024)
    await producer.start()
    total = 0
    pending = []
    for i in range(start, start + n):
        value = record(i, rng)
        total += len(value)
        pending.append(await producer.send(topic, value, partition=i % PARTITIONS))
        if len(pending) >= 20_000:
            await asyncio.gather(*pending)
            pending.clear()
    await asyncio.gather(*pending)
    await producer.stop()
    return total


async def aiokafka_alone(bootstrap: str, n: int) -> float:
    consumer = AIOKafkaConsumer(TOPIC, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                enable_auto_commit=False, group_id=None, max_partition_fetch_bytes=8 << 20)
    await consumer.start()
    seen, started = 0, None
    try:
        while seen < n:
            batch = await consumer.getmany(timeout_ms=1000, max_records=10_000)
            if started is None and batch:
                started = time.perf_counter()
            seen += sum(len(v) for v in batch.values())
    finally:
        await consumer.stop()
    return time.perf_counter() - (started or time.perf_counter())


def jvm_cpu(spark: SparkRuntime) -> float:
    """utime + stime of the driver JVM, in seconds."""
    pid = spark.jvm_pid()
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Run:
    """One sink run's figures."""

    def __init__(self, label: str, seconds: float, stages: dict[str, tuple[float, float]], python_cpu: float,
                 jvm_cpu: float, rows: int) -> None:
        self.label, self.seconds, self.stages, self.rows = label, seconds, stages, rows
        self.python_cpu, self.jvm_cpu = python_cpu, jvm_cpu


async def sink(worker_props: dict[str, str], connector_props: dict[str, str], n: int, spark: SparkRuntime,
               table: str = TABLE) -> tuple[float, dict[str, tuple[float, float]], float, float]:
    worker = parse_worker(worker_props)
    daemon = Standalone(worker, [parse_connector(connector_props, worker)], spark)
    runner = asyncio.ensure_future(daemon.run())
    started = None
    cpu0 = jvm0 = 0.0
    while not runner.done():
        await asyncio.sleep(0.05)
        if not daemon.connectors:
            continue
        task = daemon.connectors[0].task
        if started is None and task.assigned:
            started, cpu0, jvm0 = time.perf_counter(), time.process_time(), jvm_cpu(spark)
        if sum(task.committed_offsets(table).values()) >= n:
            break
    elapsed = time.perf_counter() - (started or time.perf_counter())
    python, jvm = time.process_time() - cpu0, jvm_cpu(spark) - jvm0
    name = connector_props["name"]
    stages = {s: (daemon.registry.get_sample_value("tabletopic_stage_seconds_total", {"connector": name, "stage": s})
                  or 0.0,
                  daemon.registry.get_sample_value("tabletopic_stage_cpu_seconds_total",
                                                   {"connector": name, "stage": s}) or 0.0) for s in STAGES}
    daemon.stop_requested.set()
    await runner
    return elapsed, stages, python, jvm


def connector(name: str, topic: str, interval_ms: int, catalog: dict[str, str], **extra: str) -> dict[str, str]:
    return {"name": name, "topics": topic, "iceberg.tables": TABLE if topic == TOPIC else "bench.warmup",
            "iceberg.tables.auto-create-enabled": "true", "iceberg.control.commit.interval-ms": str(interval_ms),
            **catalog, **extra}


def backlog(args: argparse.Namespace, work: Path) -> None:
    runs: list[Run] = []
    with EmbeddedBroker(log_path=work / "broker.log") as broker:
        bootstrap = broker.bootstrap_servers
        nbytes = asyncio.run(produce(bootstrap, TOPIC, args.records))
        asyncio.run(produce(bootstrap, WARMUP, 100_000))
        baseline = asyncio.run(aiokafka_alone(bootstrap, args.records))
        conf = {"spark.master": "local[2]"}
        if args.jfr:  # Java Flight Recorder over the whole run, for docs/performance.md
            conf["spark.driver.extraJavaOptions"] = f"-XX:StartFlightRecording=filename={args.jfr},settings=profile"
        spark = SparkRuntime(conf, lake=not args.no_lake)
        spark.session  # noqa: B018 - started before the clock, as a running daemon's would be
        worker = {"bootstrap.servers": bootstrap, "listeners": "", "value.converter.schemas.enable": "false",
                  "consumer.session.timeout.ms": "6000", "consumer.max.poll.records": str(args.max_poll_records)}
        local = {"iceberg.catalog": "local", "iceberg.catalog.type": "hadoop",
                 "iceberg.catalog.warehouse": "file://" + str(work / "warehouse")}
        extra = {"tabletopic.buffer.flush-bytes": str(args.flush_bytes)} if args.flush_bytes else {}
        asyncio.run(sink(worker, connector("warmup", WARMUP, args.interval_ms, local), 100_000, spark,
                         "bench.warmup"))
        for i in range(args.runs):
            catalog = {**local, "iceberg.catalog.warehouse": "file://" + str(work / f"warehouse-{i}")}
            seconds, stages, python, jvm = asyncio.run(sink(
                worker, connector(f"bench-{i}", TOPIC, args.interval_ms, catalog, **extra), args.records, spark))
            rows = spark.activate().sql(f"SELECT count(*) FROM local.{TABLE}").collect()[0][0]
            runs.append(Run(f"tabletopic, file:// run {i + 1}", seconds, stages, python, jvm, rows))
        with SeaweedLake(work) if not args.no_lake else contextlib.nullcontext() as weed:
            if weed is not None:
                rest = {f"iceberg.catalog.{k}": v for k, v in weed.rest_props().items()}
                seconds, stages, python, jvm = asyncio.run(sink(
                    worker, connector("bench-lake", TOPIC, args.interval_ms, {"iceberg.catalog": "lake", **rest},
                                      **extra), args.records, spark))
                rows = spark.activate().sql(f"SELECT count(*) FROM lake.{TABLE}").collect()[0][0]
                runs.append(Run("tabletopic, S3 + REST catalog", seconds, stages, python, jvm, rows))
        spark.stop()
    mib = nbytes / (1 << 20)
    print(f"\n{args.records:,} JSON records, {mib:.1f} MiB of values ({nbytes / args.records:.0f} B each), "
          f"{PARTITIONS} partitions, commit interval {args.interval_ms} ms, 2 cores, local[2]\n")
    print(f"{'':34}{'seconds':>9}{'records/s':>12}{'MiB/s':>8}{'vs aiokafka':>13}{'Python CPU-s':>14}{'JVM CPU-s':>11}")
    print(f"{'aiokafka alone (baseline)':34}{baseline:>9.2f}{args.records / baseline:>12,.0f}{mib / baseline:>8.2f}"
          f"{1.0:>13.3f}")
    for run in runs:
        rate = args.records / run.seconds
        print(f"{run.label:34}{run.seconds:>9.2f}{rate:>12,.0f}{mib / run.seconds:>8.2f}"
              f"{baseline / run.seconds:>13.3f}{run.python_cpu:>14.2f}{run.jvm_cpu:>11.2f}")
    local_runs = [r for r in runs if "file://" in r.label]
    median = sorted(local_runs, key=lambda r: r.seconds)[len(local_runs) // 2]
    print(f"\nmedian of the file:// runs: {args.records / median.seconds:,.0f} records/s, "
          f"{mib / median.seconds:.2f} MiB/s, {baseline / median.seconds:.3f} of aiokafka alone")
    print(f"\nphases of the median run ({median.label}); wall seconds overlap, as the phases do:\n")
    print(f"{'phase':10}{'wall s':>9}{'records/s':>12}{'Python thread CPU-s':>22}")
    for stage in STAGES:
        wall, cpu = median.stages[stage]
        rate = f"{args.records / wall:,.0f}" if wall else "-"
        print(f"{stage:10}{wall:>9.2f}{rate:>12}{cpu:>22.2f}")
    print(f"{'whole run':10}{median.seconds:>9.2f}{args.records / median.seconds:>12,.0f}"
          f"{median.python_cpu:>22.2f}  (JVM {median.jvm_cpu:.2f} CPU-s)")
    for run in runs:
        print(f"rows in the table, {run.label}: {run.rows:,} (expected {args.records:,})")


# -- sustained ----------------------------------------------------------------------------------------------
def _producer_process(bootstrap: str, rate: int, seconds: float, start: int, done: Any) -> None:
    """Produce ``rate`` records/s for ``seconds`` in a process of its own (its CPU is not the sink's), with
    librdkafka (confluent-kafka): a Python producer would spend the sink's cores making the load."""
    from confluent_kafka import Producer

    rng = random.Random(start)
    values = [record(i, rng) for i in range(2000)]  # made ahead: the producer must keep pace, not build JSON
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 10000,
                         "queue.buffering.max.messages": 1_000_000, "enable.idempotence": False, "acks": 1})
    began = time.perf_counter()
    sent = 0
    while (elapsed := time.perf_counter() - began) < seconds:
        due = int(elapsed * rate)
        while sent < due:
            try:
                producer.produce(TOPIC, values[sent % len(values)], partition=sent % PARTITIONS)
            except BufferError:
                producer.poll(0.01)
                continue
            sent += 1
        producer.poll(0)
        time.sleep(0.002)
    producer.flush(60)
    done.value = sent


class _Commits(logging.Handler):
    """The daemon's "committed" log events: each one's barrier seconds (barrier to snapshot)."""

    def __init__(self) -> None:
        super().__init__()
        self.latencies: list[tuple[float, float]] = []  # (when, seconds)

    def emit(self, record: logging.LogRecord) -> None:
        event = record.msg if isinstance(record.msg, dict) else {}
        if event.get("event") == "committed" and "round_seconds" in event:
            self.latencies.append((time.monotonic(), float(event["round_seconds"])))


async def _hold(bootstrap: str, rate: int, window_s: float, worker: dict[str, str], spark: SparkRuntime,
                work: Path, commits: _Commits, interval_ms: int, start: int) -> dict[str, Any]:
    """Run a fresh sink while a producer sends ``rate`` records/s for ``window_s``: does lag stay bounded?"""
    name = f"sustained-{rate}"
    catalog = {"iceberg.catalog": "local", "iceberg.catalog.type": "hadoop",
               "iceberg.catalog.warehouse": "file://" + str(work / f"warehouse-{rate}")}
    config = connector(name, TOPIC, interval_ms, catalog, **{"consumer.override.auto.offset.reset": "latest"})
    parsed_worker = parse_worker(worker)
    daemon = Standalone(parsed_worker, [parse_connector(config, parsed_worker)], spark)
    runner = asyncio.ensure_future(daemon.run())
    while not (daemon.connectors and daemon.connectors[0].task.assigned):
        await asyncio.sleep(0.1)
    await asyncio.sleep(2)
    done = multiprocessing.Value("q", 0)
    producer = multiprocessing.Process(target=_producer_process, args=(bootstrap, rate, window_s, start, done))
    since = time.monotonic()
    producer.start()
    task = daemon.connectors[0].task
    first = None
    lags: list[tuple[float, float]] = []
    peak_rss = 0.0
    while producer.is_alive():
        await asyncio.sleep(1)
        lag = sum(daemon.registry.get_sample_value("tabletopic_committed_lag_records",
                                                   {"connector": name, "topic": TOPIC, "partition": str(p)}) or 0
                  for p in range(PARTITIONS))
        lags.append((time.monotonic() - since, lag))
        peak_rss = max(peak_rss, rss_mib(os.getpid()) + rss_mib(spark.jvm_pid() or os.getpid()))
        if first is None and task.committed_offsets(TABLE):
            first = time.monotonic()
    producer.join()
    daemon.stop_requested.set()
    await runner
    latencies = sorted(s for when, s in commits.latencies if when >= since)
    commits.latencies.clear()
    # Bounded: the producer kept the rate, and the records not committed stayed under a few intervals'
    # worth in the second half of the window, without growing there.
    achieved = done.value / window_s
    bound = rate * 3 * interval_ms / 1000
    half = [lag for t, lag in lags if t >= window_s / 2]
    bounded = achieved >= 0.95 * rate and bool(half) and max(half) <= bound and \
        half[-1] <= max(half[: max(1, len(half) // 2)]) + rate
    p = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] if latencies else float("nan")  # noqa: E731
    return {"rate": rate, "achieved": achieved, "bounded": bounded,
            "max_lag": max((lag for _, lag in lags), default=0), "bound": bound,
            "p50": p(0.5), "p99": p(0.99), "commits": len(latencies), "rss_mib": peak_rss, "sent": done.value}


def sustained(args: argparse.Namespace, work: Path) -> None:
    commits = _Commits()
    commit_log = logging.getLogger("tabletopic.commit.table_commits")
    commit_log.addHandler(commits)
    commit_log.setLevel(logging.INFO)
    commit_log.propagate = False  # its INFO events are read here, not printed
    results = []
    with EmbeddedBroker(log_path=work / "broker.log") as broker:
        bootstrap = broker.bootstrap_servers
        asyncio.run(create_topic(bootstrap, TOPIC, PARTITIONS))
        asyncio.run(produce(bootstrap, WARMUP, 100_000))
        spark = SparkRuntime({"spark.master": "local[2]"})
        spark.session  # noqa: B018
        worker = {"bootstrap.servers": bootstrap, "listeners": "", "value.converter.schemas.enable": "false",
                  "consumer.session.timeout.ms": "6000", "consumer.max.poll.records": str(args.max_poll_records)}
        local = {"iceberg.catalog": "local", "iceberg.catalog.type": "hadoop",
                 "iceberg.catalog.warehouse": "file://" + str(work / "warehouse")}
        asyncio.run(sink(worker, connector("warmup", WARMUP, args.interval_ms, local), 100_000, spark,
                         "bench.warmup"))
        low, high = 0, None
        rate = args.start_rate
        for step in range(args.steps):
            result = asyncio.run(_hold(bootstrap, rate, args.window_s, worker, spark, work, commits,
                                       args.interval_ms, step * 10_000_000))
            results.append(result)
            print(f"  {rate:>8,} records/s asked, {result['achieved']:>9,.0f} produced: "
                  f"{'bounded' if result['bounded'] else 'NOT bounded'}, max lag "
                  f"{result['max_lag']:,.0f} (bound {result['bound']:,.0f}), commit p50 {result['p50']:.2f} s, "
                  f"p99 {result['p99']:.2f} s, peak RSS {result['rss_mib']:,.0f} MiB", flush=True)
            if result["bounded"]:
                low = rate
                rate = int(rate * 1.5) if high is None else (rate + high) // 2
            else:
                high = rate
                rate = (low + rate) // 2
            if high is not None and high - low <= args.start_rate // 8:
                break
        spark.stop()
    best = max((r for r in results if r["bounded"]), key=lambda r: r["rate"], default=None)
    size = len(record(0, random.Random(1)))
    print(f"\nsustained, {args.window_s:.0f} s windows, commit interval {args.interval_ms} ms, 2 cores:")
    if best is None:
        print("  no rate tried kept the lag bounded")
        return
    print(f"  highest bounded rate: {best['rate']:,} records/s = {best['rate'] * size / (1 << 20):.2f} MiB/s "
          f"({size} B records); commit latency p50 {best['p50']:.2f} s, p99 {best['p99']:.2f} s over "
          f"{best['commits']} commits; peak RSS of the process tree {best['rss_mib']:,.0f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--interval-ms", type=int, default=2_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--max-poll-records", type=int, default=10_000)
    parser.add_argument("--flush-bytes", type=int, default=0, help="tabletopic.buffer.flush-bytes (0: the default)")
    parser.add_argument("--no-lake", action="store_true", help="skip the run into S3 behind a REST catalog")
    parser.add_argument("--jfr", help="record the driver JVM with Java Flight Recorder into this file")
    parser.add_argument("--sustained", action="store_true", help="find the highest rate the sink keeps up with")
    parser.add_argument("--window-s", type=float, default=120.0)
    parser.add_argument("--start-rate", type=int, default=40_000)
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args()
    configure_logging("WARNING", "console")
    work = Path(tempfile.mkdtemp(prefix="tabletopic-bench-"))
    try:
        if args.sustained:
            sustained(args, work)
        else:
            backlog(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
