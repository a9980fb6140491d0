"""``tabletopic demo``: the whole sink on embedded defaults, then a query of the table.

It starts the bundled broker on loopback, creates a topic, produces sample
clickstream events, runs the sink against a local warehouse for a few commit
intervals, prints what Spark reads back, and removes everything it made.
With ``--lake`` the warehouse is on S3 behind an Iceberg REST catalog (SeaweedFS
on loopback), and the demo ends by showing how Spark and DuckDB query it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import shutil
import tempfile
import time
from pathlib import Path

from aiokafka import AIOKafkaProducer

from tabletopic.commit.source_offsets import read_offsets
from tabletopic.config.connector import parse_connector
from tabletopic.config.worker import parse_worker
from tabletopic.demo.broker import EmbeddedBroker, create_topic, free_port
from tabletopic.demo.lake_servers import SeaweedLake, duckdb_offline
from tabletopic.ops.logging_setup import configure_logging
from tabletopic.standalone import Standalone
from tabletopic.write.spark_session import SparkRuntime

TOPIC = "clickstream"
TABLE = "demo.clickstream"
PARTITIONS = 4
INTERVAL_MS = 3000
PAGES = ["/", "/search", "/product/42", "/product/7", "/cart", "/checkout", "/help"]
ACTIONS = ["view", "view", "view", "click", "add_to_cart", "purchase"]
COUNTRIES = ["DE", "FR", "US", "BR", "IN", "JP", "NG"]


def sample_events(n: int, seed: int = 7) -> list[tuple[bytes, bytes, int]]:
    rng = random.Random(seed)
    start = time.time() - 3 * 86_400
    events = []
    for i in range(n):
        user = rng.randrange(500)
        ts = start + i * (3 * 86_400 / n)
        event = {
            "event_id": i,
            "user_id": user,
            "session_id": f"s{user}-{int(ts // 1800)}",
            "page": rng.choice(PAGES),
            "action": rng.choice(ACTIONS),
            "country": rng.choice(COUNTRIES),
            "duration_ms": rng.randrange(50, 30_000),
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + "Z",
        }
        events.append((str(user).encode(), json.dumps(event).encode(), user % PARTITIONS))
    return events


async def _produce(bootstrap: str, events: list[tuple[bytes, bytes, int]]) -> None:
    await create_topic(bootstrap, TOPIC, PARTITIONS)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=False, linger_ms=5)
    await producer.start()
    try:
        sends = [await producer.send(TOPIC, value=v, key=k, partition=p) for k, v, p in events]
        await asyncio.gather(*sends)
    finally:
        await producer.stop()


async def _run_sink(daemon: Standalone, expected: int, intervals: int) -> None:
    runner = asyncio.ensure_future(daemon.run())
    deadline = time.monotonic() + max(intervals * INTERVAL_MS / 1000 + 60, 120)
    started = time.monotonic()
    while time.monotonic() < deadline and not runner.done():
        await asyncio.sleep(1)
        if time.monotonic() - started < intervals * INTERVAL_MS / 1000:
            continue
        task = daemon.connectors[0].task if daemon.connectors else None
        if task is not None and sum(task.committed_offsets(TABLE).values()) >= expected:
            break
    daemon.stop_requested.set()
    code = await runner
    if code != 0:
        raise RuntimeError(f"the sink stopped with exit code {code}")


def run_demo(records: int = 20_000, intervals: int = 3, keep: bool = False, lake: bool = False) -> int:
    configure_logging("INFO", "console")
    work = Path(tempfile.mkdtemp(prefix="tabletopic-demo-"))
    print(f"== tabletopic demo in {work}")
    try:
        with EmbeddedBroker(log_path=work / "broker.log") as broker, \
                (SeaweedLake(work) if lake else contextlib.nullcontext()) as weed:
            print(f"== broker on {broker.bootstrap_servers}; producing {records:,} clickstream events to {TOPIC!r}")
            events = sample_events(records)
            asyncio.run(_produce(broker.bootstrap_servers, events))
            port = free_port()
            worker = parse_worker({
                "bootstrap.servers": broker.bootstrap_servers,
                "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                "value.converter.schemas.enable": "false",
                "listeners": f"http://127.0.0.1:{port}",
                "consumer.session.timeout.ms": "6000",
                "log.format": "console",
            })
            if weed is not None:
                catalog = {"iceberg.catalog": "lake",
                           **{f"iceberg.catalog.{k}": v for k, v in weed.rest_props().items()}}
                where = f"s3://{weed.warehouse} behind the REST catalog {weed.rest_uri} (SeaweedFS)"
            else:
                catalog = {"iceberg.catalog.type": "hadoop",
                           "iceberg.catalog.warehouse": "file://" + str(work / "warehouse")}
                where = str(work / "warehouse")
            connector = parse_connector({
                "name": "clickstream-demo",
                "connector.class": "org.apache.iceberg.connect.IcebergSinkConnector",
                "topics": TOPIC,
                "iceberg.tables": TABLE,
                "iceberg.tables.auto-create-enabled": "true",
                "iceberg.tables.default-partition-by": "day(ts)",
                "iceberg.control.commit.interval-ms": str(INTERVAL_MS),
                **catalog,
            }, worker)
            print(f"== sink running (metrics on http://127.0.0.1:{port}/metrics), "
                  f"commit interval {INTERVAL_MS} ms, warehouse {where}")
            # Ours, so it outlives the sink for the query below.
            spark = SparkRuntime(worker.spark_conf, lake=connector.catalog.needs_lake_jars)
            daemon = Standalone(worker, [connector], spark)
            try:
                asyncio.run(_run_sink(daemon, records, intervals))
                _show(daemon, connector.catalog_name, connector.group_id, records)
                if weed is not None:
                    _show_lake(daemon, connector.catalog_name, weed)
            finally:
                spark.stop()
        return 0
    finally:
        if keep:
            print(f"== kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def _show_lake(daemon: Standalone, catalog: str, weed: SeaweedLake) -> None:
    """How to query the table from elsewhere, shown working with DuckDB (no JVM) while the lake still runs."""
    java = daemon.spark.iceberg_catalog(catalog).loadTable(
        daemon.spark.jvm.org.apache.iceberg.catalog.TableIdentifier.parse(TABLE))
    files = [str(f.location()) for f in java.currentSnapshot().addedDataFiles(java.io())]
    print(f"\n== the table lives on S3: {java.location()!s} ({len(files)} data files in the last snapshot)")
    print("-- Spark: spark-sql --conf spark.sql.catalog.lake=org.apache.iceberg.spark.SparkCatalog "
          f"--conf spark.sql.catalog.lake.type=rest --conf spark.sql.catalog.lake.uri={weed.rest_uri} "
          f"--conf spark.sql.catalog.lake.warehouse=s3://{weed.warehouse} ... (plus the credential and s3.* keys)")
    sql = [f"CREATE SECRET rest (TYPE iceberg, CLIENT_ID '{weed.access_key}', CLIENT_SECRET '<secret>', "
           f"OAUTH2_SERVER_URI '{weed.rest_uri}/v1/oauth/tokens')",
           f"ATTACH 's3://{weed.warehouse}' AS lake (TYPE iceberg, SECRET rest, ENDPOINT '{weed.rest_uri}')",
           f"SELECT action, count(*) FROM lake.{TABLE} GROUP BY 1 ORDER BY 2 DESC"]
    print("-- DuckDB (extensions iceberg and httpfs, and an S3 secret for the data files):")
    for line in sql:
        print(f"   {line};")
    try:
        con = duckdb_offline("avro", "iceberg", "httpfs")
        con.execute(weed.duckdb_secret())
        con.execute(sql[0].replace("<secret>", weed.secret_key))
        con.execute(sql[1])
        print(con.execute(sql[2]).fetchall())
    except Exception as exc:  # DuckDB is optional: the dev extra has it
        print(f"   (DuckDB could not run here: {exc})")


def _show(daemon: Standalone, catalog: str, group: str, expected: int) -> None:
    spark = daemon.spark.activate()
    table = f"{catalog}.{TABLE}"
    total = spark.sql(f"SELECT count(*) AS n FROM {table}").collect()[0].n
    print(f"\n== {table}: {total:,} rows (produced {expected:,})")
    print("\n-- events per day and action")
    spark.sql(f"""SELECT date(ts) AS day, action, count(*) AS events FROM {table}
                  GROUP BY 1, 2 ORDER BY 1, 3 DESC""").show(30, truncate=False)
    print("-- top pages by purchases")
    spark.sql(f"""SELECT page, count_if(action = 'purchase') AS purchases, count(*) AS events,
                  round(avg(duration_ms)) AS avg_ms FROM {table} GROUP BY page ORDER BY purchases DESC""").show()
    print("-- a few rows")
    spark.sql(f"SELECT * FROM {table} ORDER BY ts DESC LIMIT 5").show(truncate=False)
    java = daemon.spark.iceberg_catalog(catalog).loadTable(
        daemon.spark.jvm.org.apache.iceberg.catalog.TableIdentifier.parse(TABLE))
    snapshots = list(java.snapshots())
    offsets = read_offsets(java, None, group)
    print(f"-- {len(snapshots)} snapshots; the last one records source offsets "
          f"{ {f'{t}[{p}]': o for (t, p), o in sorted(offsets.items())} }")
    if total != expected:
        raise RuntimeError(f"the table has {total} rows but {expected} events were produced")
