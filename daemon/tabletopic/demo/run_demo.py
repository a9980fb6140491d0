"""``tabletopic demo``: the whole sink on embedded defaults, then a query of the table.

It starts the bundled broker on loopback, creates a topic, produces sample
clickstream events as JSON, and Protobuf orders and payments to two ``shop.*``
topics (their schema in the daemon's built-in Schema Registry), runs the sink
against a local warehouse for a few commit intervals, a connector for the JSON
topic and one in Table Topic mode for the Protobuf ones, prints what Spark reads
back, and removes everything it made.
With ``--lake`` the warehouse is on S3 behind an Iceberg REST catalog (SeaweedFS
on loopback); with ``--lake=hive`` on local files behind a Hive Metastore (Hive 2.3
from the pyspark wheel's jars, on Derby). Either way the demo ends by showing how
Spark and DuckDB query it.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import time
from pathlib import Path

from aiokafka import AIOKafkaProducer

from tabletopic.app.standalone import Standalone
from tabletopic.config.connector import parse_connector
from tabletopic.config.worker import parse_worker
from tabletopic.demo.broker import EmbeddedBroker, create_topic, free_port
from tabletopic.demo.hive_metastore import HiveMetastore
from tabletopic.demo.lake_servers import SeaweedLake, duckdb_offline
from tabletopic.demo.sample_data import (
    PARTITIONS,
    SHOP_NAMESPACE,
    SHOP_TOPICS,
    register_shop_schema,
    sample_events,
    shop_events,
)
from tabletopic.observe.logging_setup import configure_logging
from tabletopic.offsets.source_offsets import decode, offsets_key
from tabletopic.route.router import topic_table
from tabletopic.write.spark_session import SparkRuntime

TOPIC = "clickstream"
TABLE = "demo.clickstream"
INTERVAL_MS = 3000
async def _produce(bootstrap: str, topics: dict[str, list[tuple[bytes, bytes, int]]]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=False, linger_ms=5)
    await producer.start()
    try:
        for topic, events in topics.items():
            await create_topic(bootstrap, topic, PARTITIONS if topic == TOPIC else 2)
            sends = [await producer.send(topic, value=v, key=k, partition=p) for k, v, p in events]
            await asyncio.gather(*sends)
    finally:
        await producer.stop()


async def _run_sink(daemon: Standalone, expected: int, shop: int, intervals: int) -> None:
    runner = asyncio.ensure_future(daemon.run())
    deadline = time.monotonic() + max(intervals * INTERVAL_MS / 1000 + 60, 120)
    started = time.monotonic()
    while time.monotonic() < deadline and not runner.done():
        await asyncio.sleep(1)
        if time.monotonic() - started < intervals * INTERVAL_MS / 1000:
            continue
        if len(daemon.connectors) < 2:
            continue
        clicks, tables = daemon.connectors[0].task, daemon.connectors[1].task
        shop_done = all(sum(o for (t, _), o in tables.committed_offsets(topic_table(SHOP_NAMESPACE, topic)).items()
                            if t == topic) >= shop for topic in SHOP_TOPICS)
        if sum(clicks.committed_offsets(TABLE).values()) >= expected and shop_done:
            break
    daemon.stop_requested.set()
    code = await runner
    if code != 0:
        raise RuntimeError(f"the sink stopped with exit code {code}")


def run_demo(records: int = 20_000, intervals: int = 3, keep: bool = False, lake: str | None = None,
             orders: int = 2_000) -> int:
    configure_logging("INFO", "console")
    work = Path(tempfile.mkdtemp(prefix="tabletopic-demo-"))
    print(f"== tabletopic demo in {work}")
    try:
        with EmbeddedBroker(log_path=work / "broker.log") as broker, \
                (SeaweedLake(work) if lake == "rest" else contextlib.nullcontext()) as weed, \
                (HiveMetastore(f"file://{work}/warehouse") if lake == "hive" else contextlib.nullcontext()) as hms:
            print(f"== broker on {broker.bootstrap_servers}; producing {records:,} clickstream events (JSON) to "
                  f"{TOPIC!r}, and {orders:,} orders and payments (Protobuf) to {', '.join(SHOP_TOPICS)}")
            schema_ids = register_shop_schema(broker.bootstrap_servers, "_schemas")
            asyncio.run(_produce(broker.bootstrap_servers, {TOPIC: sample_events(records),
                                                            **shop_events(orders, schema_ids)}))
            port, registry_port = free_port(), free_port()
            worker = parse_worker({
                "bootstrap.servers": broker.bootstrap_servers,
                "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                "value.converter.schemas.enable": "false",
                "listeners": f"http://127.0.0.1:{port}",
                "schema.registry.listeners": f"http://127.0.0.1:{registry_port}",
                "consumer.session.timeout.ms": "6000",
                "log.format": "console",
            })
            if weed is not None:
                catalog = {"iceberg.catalog": "lake",
                           **{f"iceberg.catalog.{k}": v for k, v in weed.rest_props().items()}}
                where = f"s3://{weed.warehouse} behind the REST catalog {weed.rest_uri} (SeaweedFS)"
            elif hms is not None:
                catalog = {"iceberg.catalog": "lake",
                           **{f"iceberg.catalog.{k}": v for k, v in hms.catalog_props().items()}}
                where = f"{hms.warehouse} behind the Hive Metastore {hms.uri}"
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
            shop = parse_connector({
                "name": "shop-tables",
                "topics.regex": r"shop\..*",
                "tabletopic.table-topic.enabled": "true",
                "tabletopic.table-topic.namespace": SHOP_NAMESPACE,
                "value.converter": "io.confluent.connect.protobuf.ProtobufConverter",
                "iceberg.control.commit.interval-ms": str(INTERVAL_MS),
                **catalog,
            }, worker)
            print(f"== sink running (metrics on http://127.0.0.1:{port}/metrics, Schema Registry on "
                  f"http://127.0.0.1:{registry_port}), commit interval {INTERVAL_MS} ms, warehouse {where}")
            # Ours, so it outlives the sink for the query below.
            spark = SparkRuntime(worker.spark_conf, lake=connector.catalog.needs_lake_jars)
            daemon = Standalone(worker, [connector, shop], spark)
            try:
                asyncio.run(_run_sink(daemon, records, orders, intervals))
                _show(daemon, connector.catalog_name, connector.group_id, records)
                _show_shop(daemon, shop.catalog_name, orders)
                if weed is not None:
                    _show_lake(daemon, connector.catalog_name, weed)
                if hms is not None:
                    _show_hive(daemon, connector.catalog_name, hms)
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
    metadata = _metadata_file(daemon, catalog)
    last = daemon.spark.activate().sql(f"SELECT summary['added-data-files'] AS files FROM {catalog}.{TABLE}.snapshots "
                                       "ORDER BY committed_at DESC LIMIT 1").collect()[0].files
    print(f"\n== the table lives on S3: {metadata.rsplit('/metadata/', 1)[0]} ({last} data files in the last snapshot)")
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


def _show_hive(daemon: Standalone, catalog: str, hms: HiveMetastore) -> None:
    """How to query the table through the metastore, and DuckDB reading its current metadata file."""
    metadata = _metadata_file(daemon, catalog)
    print(f"\n== the table is registered in the Hive Metastore {hms.uri}; its metadata is {metadata}")
    print("-- Spark: spark-sql --conf spark.sql.catalog.lake=org.apache.iceberg.spark.SparkCatalog "
          f"--conf spark.sql.catalog.lake.type=hive --conf spark.sql.catalog.lake.uri={hms.uri}")
    sql = f"SELECT action, count(*) FROM iceberg_scan('{metadata.removeprefix('file:')}') GROUP BY 1 ORDER BY 2 DESC"
    print(f"-- DuckDB (extension iceberg): {sql};")
    try:
        print(duckdb_offline("avro", "iceberg").execute(sql).fetchall())
    except Exception as exc:  # DuckDB is optional: the dev extra has it
        print(f"   (DuckDB could not run here: {exc})")


def _metadata_file(daemon: Standalone, catalog: str) -> str:
    """The table's current metadata file: the newest entry of its metadata log, which lists the current one too."""
    return str(daemon.spark.activate().sql(f"SELECT file FROM {catalog}.{TABLE}.metadata_log_entries "
                                           "ORDER BY timestamp DESC LIMIT 1").collect()[0].file)


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
    snapshots = spark.sql(f"SELECT count(*) AS n FROM {table}.snapshots").collect()[0].n
    # What a user reads the sink's progress with: the newest snapshot summary that carries the group's offsets.
    key = offsets_key(group)
    marked = spark.sql(f"SELECT summary['{key}'] AS offsets FROM {table}.snapshots "
                       f"WHERE summary['{key}'] IS NOT NULL ORDER BY committed_at DESC LIMIT 1").collect()
    offsets = decode(marked[0].offsets) if marked else {}
    print(f"-- {snapshots} snapshots; the last one records source offsets "
          f"{ {f'{t}[{p}]': o for (t, p), o in sorted(offsets.items())} }")
    if total != expected:
        raise RuntimeError(f"the table has {total} rows but {expected} events were produced")


def _show_shop(daemon: Standalone, catalog: str, expected: int) -> None:
    """The Table Topic mode tables: one per shop.* topic, made from the Protobuf schema."""
    spark = daemon.spark.activate()
    orders, payments = (f"{catalog}.{topic_table(SHOP_NAMESPACE, t)}" for t in SHOP_TOPICS)
    print(f"\n== Table Topic mode: {orders} and {payments}, one table per topic, from the Protobuf schema")
    for table in (orders, payments):
        n = spark.sql(f"SELECT count(*) AS n FROM {table}").collect()[0].n
        print(f"-- {table}: {n:,} rows (produced {expected:,})")
        if n != expected:
            raise RuntimeError(f"{table} has {n} rows but {expected} messages were produced")
    spark.sql(f"DESCRIBE {orders}").show(truncate=False)
    print("-- revenue by payment method and delivery")
    spark.sql(f"""SELECT p.method, IF(o.delivery.address IS NOT NULL, 'address', 'pickup') AS delivery,
                  count(*) AS orders, round(sum(p.amount), 2) AS revenue
                  FROM {orders} o JOIN {payments} p ON o.order_id = p.order_id
                  GROUP BY 1, 2 ORDER BY 4 DESC""").show()
