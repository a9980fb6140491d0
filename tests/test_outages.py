"""A failure of the system is never a bad record: a catalog outage dead-letters nothing and loses nothing."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from py4j.protocol import Py4JJavaError

from tabletopic.demo.broker import free_port
from tabletopic.demo.hive_metastore import HiveMetastore
from tabletopic.kafka.clients import KafkaClients
from tabletopic.registry.service import SchemaRegistryService
from tabletopic.write.spark_session import SparkRuntime
from tests.avro_orders import AVRO, order, order_schema, serializer
from tests.postgres_server import PostgresServer, postgres_available
from tests.support import (
    Rest,
    Warehouse,
    connector_props,
    create_topic,
    events,
    failed_task_trace,
    listening_daemon,
    produce,
    unique,
    wait_until,
)

OUTAGE_BEGINS = "a system the sink needs is unavailable; its records are read again once it answers"


def failures(rest: Rest, connector: dict[str, Any]) -> float:
    """The connector's failures of a system it needs so far: each retry counts one."""
    try:
        return rest.metric("tabletopic_catalog_failures_total", connector=connector["name"])
    except OSError:  # the daemon's listener is not up yet
        return 0.0

PARTITIONS = 2


def _end_offset(bootstrap: str, topic: str) -> int:
    async def go() -> int:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
        await consumer.start()
        try:
            ends = await consumer.end_offsets([TopicPartition(topic, 0)])
            return int(ends[TopicPartition(topic, 0)])
        finally:
            await consumer.stop()

    return asyncio.run(go())


@contextlib.contextmanager
def catalog_server(kind: str, warehouse: str) -> Iterator[tuple[dict[str, str], Callable[[], Any], Callable[[], Any]]]:
    """A catalog on a server the test stops and starts again: its iceberg.catalog.* properties (without the
    prefix), and how to stop and start it. jdbc: PostgreSQL itself; hive: the Hive Metastore before it."""
    with PostgresServer() as pg:
        if kind == "jdbc":
            yield {**pg.jdbc_props(), "warehouse": warehouse}, pg.pause, pg.resume
            return
        jdbc = pg.jdbc_props()
        with HiveMetastore(warehouse, (jdbc["uri"], jdbc["jdbc.user"], jdbc["jdbc.password"])) as hms:
            yield hms.catalog_props(), hms.pause, hms.start


@pytest.mark.slow
@pytest.mark.skipif(not postgres_available(), reason="PostgreSQL and its JDBC driver (.ci/run installs them)")
@pytest.mark.parametrize("kind", ["jdbc", "hive"])
def test_a_catalog_outage_dead_letters_nothing_and_loses_nothing(bootstrap: str, spark: SparkRuntime,
                                                                 tmp_path: Path, kind: str) -> None:
    topic, dlq = unique("outage"), unique("outage_dlq")
    create_topic(bootstrap, topic, PARTITIONS)
    create_topic(bootstrap, dlq, 1)
    with catalog_server(kind, "file://" + str(tmp_path / "wh")) as (props, pause, resume):
        catalog = unique(kind)
        reader = Warehouse(spark, tmp_path, props, name=catalog)
        connector = {
            "name": unique("outage"), "topics": topic, "value.converter.schemas.enable": "false",
            "iceberg.tables.dynamic-enabled": "true", "iceberg.tables.route-field": "table",
            "iceberg.tables.auto-create-enabled": "true", "iceberg.control.commit.interval-ms": "1000",
            "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq,
            "tabletopic.catalog.max-consecutive-failures": "1000",
            "iceberg.catalog": catalog, **{f"iceberg.catalog.{k}": v for k, v in props.items()},
        }
        group = f"connect-{connector['name']}"
        produced = {p: 0 for p in range(PARTITIONS)}
        rows: dict[str, set[int]] = {"outage.first": set(), "outage.second": set()}

        def send(table: str, first: int, n: int) -> None:
            batch = []
            for i in range(first, first + n):
                batch.append((str(i).encode(), json.dumps({"table": table, "id": i}).encode(), i % PARTITIONS))
                produced[i % PARTITIONS] += 1
                rows[table].add(i)
            produce(bootstrap, topic, batch)

        def committed() -> dict[int, int]:
            best = {p: 0 for p in range(PARTITIONS)}
            try:
                for table in rows:
                    if reader.exists(table):
                        for (_, p), offset in reader.offsets(table, group).items():
                            best[p] = max(best[p], offset)
            except Py4JJavaError:  # this reader's pooled connections died with the server; asked again
                return {}
            return best

        daemon, rest = listening_daemon(tmp_path, bootstrap, [connector])
        send("outage.first", 0, 500)
        wait_until(lambda: committed() == produced, 180, "the first table committed", daemon)

        pause()
        # Records for a table not created yet, and for the one the sink has open.
        send("outage.second", 10_000, 500)
        send("outage.first", 500, 500)
        # One warning when the outage starts; each retry is counted, not logged.
        wait_until(lambda: OUTAGE_BEGINS in daemon.output(), 120, "the outage noticed", daemon)
        wait_until(lambda: failures(rest, connector) >= 3, 120, "retries", daemon)
        resume()

        # committed() takes, per partition, the table furthest on: a round whose commit to one table failed
        # (the catalog connection it held died with the server) leaves the other ahead, and that table's
        # rows land with a later round. So each table's rows are waited for as well.
        def every_row() -> bool:
            try:
                return all(reader.exists(table) and reader.sql(f"SELECT count(*) FROM {{c}}.{table}")[0][0]
                           == len(ids) for table, ids in rows.items())
            except Py4JJavaError:
                return False

        wait_until(lambda: committed() == produced and every_row(), 240,
                   "every record committed after the outage", daemon)
        assert daemon.terminate() == 0, daemon.output()[-3000:]

        for table, ids in rows.items():
            reader.assert_intact(table)
            got = reader.sql(f"SELECT count(*), count(DISTINCT id), sum(id) FROM {{c}}.{table}")[0]
            assert tuple(int(v) for v in got) == (len(ids), len(ids), sum(ids)), table
        assert _end_offset(bootstrap, dlq) == 0, "a record was dead-lettered for an outage"


def test_a_schema_registry_outage_dead_letters_nothing_and_loses_nothing(bootstrap: str, warehouse: Warehouse,
                                                                        tmp_path: Path) -> None:
    """The registry is down when the sink first needs the schema; it waits, then takes every record."""
    topic, dlq, table = unique("regdown"), unique("regdown_dlq"), "outage.orders"
    create_topic(bootstrap, topic, PARTITIONS)
    create_topic(bootstrap, dlq, 1)
    url, schemas = f"http://127.0.0.1:{free_port()}", unique("_schemas")

    def registry() -> SchemaRegistryService:
        service = SchemaRegistryService(url, KafkaClients([bootstrap], {}), schemas, "BACKWARD")
        service.start()
        return service

    up = registry()
    serialize = serializer(url, order_schema(1))
    records = [(None, serialize(topic, order(1, i)), i % PARTITIONS) for i in range(300)]
    up.stop()
    produce(bootstrap, topic, records)
    connector = connector_props("regdown", topic, table, warehouse, {
        "iceberg.tables.auto-create-enabled": "true", "value.converter": AVRO,
        "value.converter.schema.registry.url": url, "errors.tolerance": "all",
        "errors.deadletterqueue.topic.name": dlq, "tabletopic.catalog.max-consecutive-failures": "1000",
        "iceberg.control.commit.interval-ms": "1000"})
    group = f"connect-{connector['name']}"
    daemon, rest = listening_daemon(tmp_path, bootstrap, [connector])
    wait_until(lambda: failures(rest, connector) >= 3, 120, "retries while the registry is down", daemon)
    assert daemon.output().count(OUTAGE_BEGINS) == 1, "one warning for the outage, not one a retry"
    assert not warehouse.exists(table)
    up = registry()
    try:
        wait_until(lambda: sum(warehouse.offsets(table, group).values()) == len(records), 180,
                   "every record committed once the registry is back", daemon)
        assert daemon.terminate() == 0, daemon.output()[-3000:]
    finally:
        up.stop()
    got = warehouse.sql(f"SELECT count(*), count(DISTINCT id) FROM {{c}}.{table}")[0]
    assert (int(got[0]), int(got[1])) == (len(records), len(records))
    assert _end_offset(bootstrap, dlq) == 0, "a record was dead-lettered for a registry outage"


@pytest.mark.slow
def test_a_commit_refused_the_same_way_three_rounds_in_a_row_fails_the_connector_with_the_cause(
        bootstrap: str, warehouse: Warehouse, tmp_path: Path) -> None:
    """Not an outage: Iceberg refuses each commit for one cause (here the branch to commit to is a tag),
    and retrying it would leave the connector RUNNING while its table stands still."""
    topic, table = unique("refused"), "refused.events"
    create_topic(bootstrap, topic, 1)
    warehouse.sql(f"CREATE TABLE {{c}}.{table} (id bigint) USING iceberg")
    warehouse.sql(f"INSERT INTO {{c}}.{table} VALUES (0)")
    warehouse.sql(f"ALTER TABLE {{c}}.{table} CREATE TAG audit")
    produce(bootstrap, topic, [(None, json.dumps({"id": i}).encode(), 0) for i in range(1, 101)])
    connector = connector_props("refused", topic, table, warehouse, {
        "value.converter.schemas.enable": "false", "iceberg.control.commit.interval-ms": "1000",
        "iceberg.tables.default-commit-branch": "audit"})
    daemon, rest = listening_daemon(tmp_path, bootstrap, [connector])
    trace = failed_task_trace(rest, connector["name"], daemon)
    assert "refused 3 rounds in a row" in trace and "audit" in trace, trace
    assert len(events(daemon, "commit failed; the round's answers are read again")) == 3
    assert daemon.alive() and rest.status_of("/health") == 200
    assert [r.id for r in warehouse.rows(table, "id")] == [0]
    daemon.terminate()
