"""Sustained end-to-end throughput: a JSON topic into a committed Iceberg table.

Produces N JSON records (default 500,000, about 200 bytes each) to a 4-partition topic on the
bundled broker, then measures on that same topic, in this run:

* baseline: aiokafka alone consuming every record (no conversion, no writes);
* tabletopic into a hadoop catalog on local files, and (unless ``--no-lake``) into S3 on
  loopback behind an Iceberg REST catalog (SeaweedFS): from the moment the sink owns its
  partitions until every offset is committed to the table (Spark start-up is excluded: it
  happens once per daemon, not per record).

    python bench/e2e_throughput.py [--records 500000] [--interval-ms 10000] [--no-lake]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import shutil
import tempfile
import time
from pathlib import Path

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from tabletopic.config.connector import parse_connector
from tabletopic.config.worker import parse_worker
from tabletopic.demo.broker import EmbeddedBroker, create_topic
from tabletopic.demo.lake_servers import SeaweedLake
from tabletopic.ops.logging_setup import configure_logging
from tabletopic.standalone import Standalone
from tabletopic.write.spark_session import SparkRuntime

TOPIC, PARTITIONS, TABLE = "bench_json", 4, "bench.events"


async def produce(bootstrap: str, n: int) -> int:
    await create_topic(bootstrap, TOPIC, PARTITIONS)
    rng = random.Random(1)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=False,
                                linger_ms=20, max_batch_size=512 * 1024)
    await producer.start()
    total = 0
    pending = []
    for i in range(n):
        value = json.dumps({
            "id": i, "user": f"user-{rng.randrange(100_000):06d}", "action": rng.choice(["view", "click", "buy"]),
            "amount": round(rng.random() * 1000, 2), "country": rng.choice(["DE", "FR", "US", "JP"]),
            "ts": f"2026-11-{1 + i % 28:02d}T{i % 24:02d}:00:00Z", "session": f"{rng.getrandbits(64):016x}",
        }).encode()
        total += len(value)
        pending.append(await producer.send(TOPIC, value, partition=i % PARTITIONS))
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


async def sink(worker_props: dict[str, str], connector_props: dict[str, str], n: int, spark: SparkRuntime) -> float:
    worker = parse_worker(worker_props)
    daemon = Standalone(worker, [parse_connector(connector_props, worker)], spark)
    runner = asyncio.ensure_future(daemon.run())
    started = None
    while not runner.done():
        await asyncio.sleep(0.2)
        if not daemon.connectors:
            continue
        task = daemon.connectors[0].task
        if started is None and task.assigned:
            started = time.perf_counter()
        if sum(task.committed_offsets(TABLE).values()) >= n:
            break
    elapsed = time.perf_counter() - (started or time.perf_counter())
    daemon.stop_requested.set()
    await runner
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--interval-ms", type=int, default=10_000)
    parser.add_argument("--no-lake", action="store_true", help="skip the run into S3 behind a REST catalog")
    args = parser.parse_args()
    configure_logging("WARNING", "console")
    work = Path(tempfile.mkdtemp(prefix="tabletopic-bench-"))
    results: list[tuple[str, float]] = []
    rows: dict[str, int] = {}
    try:
        with EmbeddedBroker(log_path=work / "broker.log") as broker:
            nbytes = asyncio.run(produce(broker.bootstrap_servers, args.records))
            results.append(("aiokafka alone (baseline)", asyncio.run(aiokafka_alone(broker.bootstrap_servers,
                                                                                    args.records))))
            spark = SparkRuntime({"spark.master": "local[2]"}, lake=not args.no_lake)
            spark.session  # noqa: B018 - started before the clock, as a running daemon's would be
            worker = {"bootstrap.servers": broker.bootstrap_servers, "listeners": "",
                      "value.converter.schemas.enable": "false", "consumer.session.timeout.ms": "6000",
                      "consumer.max.poll.records": "10000"}
            targets = [("tabletopic, file:// (hadoop)", "local", {
                "iceberg.catalog": "local", "iceberg.catalog.type": "hadoop",
                "iceberg.catalog.warehouse": "file://" + str(work / "warehouse")})]
            with SeaweedLake(work) if not args.no_lake else contextlib.nullcontext() as weed:
                if weed is not None:
                    rest = {f"iceberg.catalog.{k}": v for k, v in weed.rest_props().items()}
                    targets.append(("tabletopic, S3 + REST catalog", "lake", {"iceberg.catalog": "lake", **rest}))
                for label, name, catalog in targets:
                    connector = {"name": f"bench-{name}", "topics": TOPIC, "iceberg.tables": TABLE,
                                 "iceberg.tables.auto-create-enabled": "true",
                                 "iceberg.control.commit.interval-ms": str(args.interval_ms), **catalog}
                    results.append((label, asyncio.run(sink(worker, connector, args.records, spark))))
                    rows[label] = spark.activate().sql(f"SELECT count(*) FROM {name}.{TABLE}").collect()[0][0]
            spark.stop()
        mib = nbytes / (1 << 20)
        print(f"\n{args.records:,} JSON records, {mib:.1f} MiB of values, {PARTITIONS} partitions, "
              f"commit interval {args.interval_ms} ms\n")
        print(f"{'':32}{'seconds':>10}{'records/s':>14}{'MiB/s':>10}")
        for label, seconds in results:
            print(f"{label:32}{seconds:>10.2f}{args.records / seconds:>14,.0f}{mib / seconds:>10.2f}")
        for label, count in rows.items():
            print(f"rows in the table, {label}: {count:,} (expected {args.records:,})")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
