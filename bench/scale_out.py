"""Sustained records/s with 1, 2 and 3 daemons on the same topic, in the same run.

Produces N JSON records (default 300,000, 6 partitions) to the bundled broker once.
Then, for each daemon count, starts that many ``tabletopic standalone`` processes
(each with its own local SparkSession) with a fresh connector and table on that
topic, and watches the table's committed offsets.  The sustained rate is the
records committed after the first commit divided by the time to the last one,
so Spark start-up is left out.  The one-daemon run is the baseline.

    python bench/scale_out.py [--records 300000] [--daemons 1,2,3]
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

from tabletopic.commit.source_offsets import read_offsets
from tabletopic.config.connector import parse_connector
from tabletopic.config.worker import parse_worker
from tabletopic.demo.broker import EmbeddedBroker, create_topic
from tabletopic.write.iceberg_tables import IcebergTables
from tabletopic.write.spark_session import SparkRuntime

PARTITIONS = 6
INTERVAL_MS = 5000


async def fill(bootstrap: str, topic: str, n: int) -> None:
    await create_topic(bootstrap, topic, PARTITIONS)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, max_batch_size=512 * 1024)
    await producer.start()
    try:
        pending = []
        for i in range(n):
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


def run(count: int, bootstrap: str, topic: str, warehouse: Path, n: int, work: Path) -> tuple[float, float]:
    name = f"scale{count}"
    connector = {"name": name, "topics": topic, "iceberg.tables": f"bench.scale{count}",
                 "value.converter.schemas.enable": "false", "iceberg.tables.auto-create-enabled": "true",
                 "iceberg.control.commit.interval-ms": INTERVAL_MS, "iceberg.catalog.type": "hadoop",
                 "iceberg.catalog.warehouse": f"file://{warehouse}"}
    worker = {"bootstrap.servers": bootstrap, "listeners": "", "log.format": "json", "spark.master": "local[2]",
              "spark.driver.memory": "1g", "consumer.session.timeout.ms": 6000,
              "consumer.heartbeat.interval.ms": 1000}
    procs = []
    for d in range(count):
        home = work / f"{name}-{d}"
        home.mkdir()
        log = open(home / "daemon.log", "wb")  # noqa: SIM115 - handed to the child
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "tabletopic.cli", "standalone", str(props(home / "w.properties", worker)),
             str(props(home / "c.properties", connector))], cwd=home, stdout=log, stderr=subprocess.STDOUT))
        log.close()
    spark = SparkRuntime({"spark.master": "local[1]", "spark.driver.memory": "512m"})
    tables = IcebergTables(spark, parse_connector(connector, parse_worker(worker)))
    first: tuple[float, int] | None = None
    last = (time.monotonic(), 0)
    try:
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:
            time.sleep(0.5)
            if not tables.exists(f"bench.scale{count}"):
                continue
            handle = tables.get(f"bench.scale{count}")
            handle.java.refresh()
            done = sum(read_offsets(handle.java, None, f"connect-{name}").values())
            if done and first is None:
                first = (time.monotonic(), done)
            if done != last[1]:
                last = (time.monotonic(), done)
            if done >= n:
                break
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(120)
        spark.stop()
    if first is None or last[1] < n:
        raise SystemExit(f"{count} daemon(s) did not commit all {n} records; see {work}")
    seconds = last[0] - first[0]
    return (n - first[1]) / seconds if seconds > 0 else float("nan"), seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--daemons", default="1,2,3")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tabletopic-scale-"))
    try:
        with EmbeddedBroker(log_path=work / "broker.log") as broker:
            asyncio.run(fill(broker.bootstrap_servers, "scale", args.records))
            results = []
            for count in (int(c) for c in args.daemons.split(",")):
                rate, seconds = run(count, broker.bootstrap_servers, "scale", work / "warehouse", args.records, work)
                results.append((count, rate, seconds))
        print(f"{args.records:,} JSON records, {PARTITIONS} partitions, {INTERVAL_MS // 1000} s commit interval, "
              "each daemon with its own local[2] SparkSession")
        print(f"{'daemons':>8}{'records/s':>12}{'seconds':>9}{'vs 1':>7}")
        base = results[0][1]
        for count, rate, seconds in results:
            print(f"{count:>8}{rate:12,.0f}{seconds:9.1f}{rate / base:7.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
