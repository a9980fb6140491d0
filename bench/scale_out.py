"""Sustained records/s with 1, 2 and 3 daemons on the same topic, in the same run.

For each daemon count it starts that many ``tabletopic standalone`` processes
(each with its own local SparkSession) with a fresh connector on one topic,
reading from the topic's end.  Once every daemon has its partitions, it
produces a warm-up of 12,000 records and waits until they are committed (so
that every JVM has run the writer), then produces N records (default 400,000,
6 partitions) and times from the first of them being produced to the snapshot
that commits the last.  The one-daemon run is the baseline.  Commits are
watched in the table's metadata files, without a JVM of the bench's own.

    python bench/scale_out.py [--records 400000] [--daemons 1,2,3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from aiokafka import AIOKafkaProducer

from tabletopic.demo.broker import EmbeddedBroker, create_topic
from tabletopic.offsets.source_offsets import offsets_key

PARTITIONS = 6
INTERVAL_MS = 2000
WARM_UP = 12_000


async def produce(bootstrap: str, topic: str, first: int, n: int) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, max_batch_size=512 * 1024)
    await producer.start()
    try:
        pending = []
        for i in range(first, first + n):
            value = json.dumps({"id": i, "user": f"u{i % 1000}", "page": f"/p/{i % 97}", "ms": i % 5000}).encode()
            pending.append(await producer.send(topic, value, partition=i % PARTITIONS))
            if len(pending) >= 10_000:
                await asyncio.gather(*pending)
                pending.clear()
        await asyncio.gather(*pending)
    finally:
        await producer.stop()


def props(path: Path, values: dict[str, object]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    return path


def committed(table_dir: Path, group: str) -> int:
    """The sum of the offsets in the table's current snapshot (the caller subtracts where it started)."""
    versions = sorted(table_dir.glob("metadata/v*.metadata.json"), key=lambda p: int(p.name[1:].split(".")[0]))
    if not versions:
        return 0
    doc = json.loads(versions[-1].read_text())
    current = next((s for s in doc.get("snapshots", []) if s["snapshot-id"] == doc.get("current-snapshot-id")), None)
    if current is None or offsets_key(group) not in current["summary"]:
        return 0
    return sum(sum(parts.values()) for parts in json.loads(current["summary"][offsets_key(group)]).values())


def wait_for(what: str, check: object, timeout: float, procs: list[subprocess.Popen[bytes]], work: Path) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return time.monotonic()
        if any(p.poll() is not None for p in procs):
            raise SystemExit(f"a daemon exited while waiting for {what}; see {work}")
        time.sleep(0.1)
    raise SystemExit(f"timed out waiting for {what}; see {work}")


def run(count: int, bootstrap: str, topic: str, warehouse: Path, n: int, work: Path, produced: int) -> float:
    name = f"scale{count}"
    connector = {"name": name, "topics": topic, "iceberg.tables": f"bench.scale{count}",
                 "value.converter.schemas.enable": "false", "iceberg.tables.auto-create-enabled": "true",
                 "iceberg.control.commit.interval-ms": INTERVAL_MS, "iceberg.catalog.type": "hadoop",
                 "iceberg.catalog.warehouse": f"file://{warehouse}",
                 "consumer.override.auto.offset.reset": "latest"}
    worker = {"bootstrap.servers": bootstrap, "listeners": "", "log.format": "json", "spark.master": "local[2]",
              "spark.driver.memory": "1g", "consumer.session.timeout.ms": 6000,
              "consumer.heartbeat.interval.ms": 1000}
    procs = []
    logs = []
    for d in range(count):
        home = work / f"{name}-{d}"
        home.mkdir()
        logs.append(home / "daemon.log")
        with open(logs[-1], "wb") as log:
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "tabletopic.cli", "standalone", str(props(home / "w.properties", worker)),
                 str(props(home / "c.properties", connector))], cwd=home, stdout=log, stderr=subprocess.STDOUT))
    table_dir, group = warehouse / "bench" / f"scale{count}", f"connect-{name}"

    def assigned() -> int:
        total = 0
        for path in logs:
            events = [json.loads(line) for line in path.read_text(errors="replace").splitlines()
                      if line.startswith("{") and '"partitions assigned"' in line]
            total += events[-1]["partitions"] if events else 0
        return total

    try:
        # Every member has its share once the group is stable (the assignment events add up).
        wait_for("the group to settle", lambda: assigned() == PARTITIONS, 300, procs, work)
        time.sleep(3.0)  # a rebalance still under way shows within a few heartbeats
        wait_for("the group to settle", lambda: assigned() == PARTITIONS, 300, procs, work)
        asyncio.run(produce(bootstrap, topic, produced, WARM_UP))
        wait_for("the warm-up", lambda: committed(table_dir, group) - produced >= WARM_UP, 300, procs, work)
        base = committed(table_dir, group)
        started = time.monotonic()
        asyncio.run(produce(bootstrap, topic, produced + WARM_UP, n))
        ended = wait_for("every record", lambda: committed(table_dir, group) - base >= n, 900, procs, work)
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(120)
    return n / (ended - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=400_000)
    parser.add_argument("--daemons", default="1,2,3")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tabletopic-scale-"))
    try:
        with EmbeddedBroker(log_path=work / "broker.log") as broker:
            for topic in ("scale", "scale-alone"):
                asyncio.run(create_topic(broker.bootstrap_servers, topic, PARTITIONS))
            started = time.monotonic()
            asyncio.run(produce(broker.bootstrap_servers, "scale-alone", 0, args.records))
            producer_alone = args.records / (time.monotonic() - started)
            results, produced = [], 0
            for count in (int(c) for c in args.daemons.split(",")):
                rate = run(count, broker.bootstrap_servers, "scale", work / "warehouse", args.records, work, produced)
                produced += WARM_UP + args.records
                results.append((count, rate))
        print(f"{args.records:,} JSON records, {PARTITIONS} partitions, {INTERVAL_MS // 1000} s commit interval, "
              "each daemon with its own local[2] SparkSession; the producer runs during the measurement")
        print(f"producer alone: {producer_alone:,.0f} records/s")
        print(f"{'daemons':>8}{'records/s':>12}{'vs 1':>7}")
        base = results[0][1]
        for count, rate in results:
            print(f"{count:>8}{rate:12,.0f}{rate / base:7.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
