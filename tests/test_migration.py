"""Taking over from the Iceberg Kafka Connect sink (Java) with the same connector file.

The table and the consumer group are left as the Java connector leaves them: a snapshot
marked with its ``kafka.connect.*`` summary keys holding the first part of the topic,
and the same offsets committed to ``connect-<name>``.  tabletopic must go on from there.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

from aiokafka import AIOKafkaConsumer, TopicPartition
from pyspark.sql import Row

from tabletopic.write.spark_session import SparkRuntime
from tests.support import (
    DaemonProcess,
    Warehouse,
    create_topic,
    produce,
    unique,
    wait_until,
    worker_props,
)

PARTITIONS = 3


def _commit_group(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    async def go() -> None:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
        await consumer.start()
        try:
            tps = [TopicPartition(t, p) for t, p in offsets]
            consumer.assign(tps)
            await consumer.commit({TopicPartition(t, p): o for (t, p), o in offsets.items()})
        finally:
            await consumer.stop()

    asyncio.run(go())


def _rows(first: int, last: int) -> list[dict[str, int]]:
    return [{"id": i, "v": i * 7 % 1000} for i in range(first, last)]


def test_tabletopic_goes_on_where_the_java_sink_stopped(bootstrap: str, spark: SparkRuntime, warehouse: Warehouse,
                                                        tmp_path: Path) -> None:
    topic, table, name = unique("migrate"), "db.migrated", unique("java-sink")
    create_topic(bootstrap, topic, PARTITIONS)
    rows = _rows(0, 3000)
    produce(bootstrap, topic, [(str(r["id"]).encode(), json.dumps(r).encode(), r["id"] % PARTITIONS) for r in rows])

    # What the Java connector did before it was stopped: partition p's first (p+1)*300 records in
    # the table in one marked snapshot, and the same offsets in its consumer group.
    per_partition = {p: [r for r in rows if r["id"] % PARTITIONS == p] for p in range(PARTITIONS)}
    done = {p: (p + 1) * 300 for p in range(PARTITIONS)}
    written = [r for p in range(PARTITIONS) for r in per_partition[p][: done[p]]]
    group = f"connect-{name}"
    warehouse.sql(f"CREATE TABLE {{c}}.{table} (id bigint, v bigint) USING iceberg TBLPROPERTIES "
                  "('format-version'='2')")
    (spark.session.createDataFrame([Row(**r) for r in written]).writeTo(f"{warehouse.catalog}.{table}")
     .option(f"snapshot-property.kafka.connect.offsets.control-iceberg.{group}", json.dumps({"0": 41}))
     .option("snapshot-property.kafka.connect.commit-id", str(uuid.uuid4()))
     .option("snapshot-property.kafka.connect.vtts", "1790000000000")
     .append())
    _commit_group(bootstrap, group, {(topic, p): o for p, o in done.items()})

    # The rest of the topic arrives after the switch.
    more = _rows(3000, 4500)
    produce(bootstrap, topic, [(str(r["id"]).encode(), json.dumps(r).encode(), r["id"] % PARTITIONS) for r in more])
    total = {p: len(per_partition[p]) + sum(1 for r in more if r["id"] % PARTITIONS == p) for p in range(PARTITIONS)}

    connector = {"name": name, "topics": topic, "iceberg.tables": table, "iceberg.control.topic": "control-iceberg",
                 "value.converter.schemas.enable": "false", "iceberg.control.commit.interval-ms": "1000",
                 **warehouse.connector_props()}
    daemon = DaemonProcess(tmp_path, worker_props(bootstrap), [connector]).start()
    wait_until(lambda: warehouse.offsets(table, group) == {(topic, p): o for p, o in total.items()}, 180,
               "every record committed", daemon)
    assert daemon.terminate() == 0, daemon.output()[-3000:]

    everything = rows + more
    got = warehouse.sql(f"SELECT count(*), count(DISTINCT id), sum(id), sum(v) FROM {{c}}.{table}")[0]
    assert tuple(int(x) for x in got) == (len(everything), len(everything), sum(r["id"] for r in everything),
                                          sum(r["v"] for r in everything))
    assert "going on where the Iceberg Kafka Connect sink stopped" in daemon.output()


def test_a_java_sink_table_without_group_offsets_is_refused(bootstrap: str, warehouse: Warehouse,
                                                            spark: SparkRuntime, tmp_path: Path) -> None:
    topic, table, name = unique("migrate_nogroup"), "db.orphan", unique("renamed")
    create_topic(bootstrap, topic, 1)
    produce(bootstrap, topic, [(b"1", json.dumps({"id": 1, "v": 1}).encode(), 0)])
    warehouse.sql(f"CREATE TABLE {{c}}.{table} (id bigint, v bigint) USING iceberg")
    (spark.session.createDataFrame([Row(id=1, v=1)]).writeTo(f"{warehouse.catalog}.{table}")
     .option("snapshot-property.kafka.connect.offsets.control-iceberg.connect-old-name", json.dumps({"0": 3}))
     .option("snapshot-property.kafka.connect.commit-id", "c0ffee").append())
    connector = {"name": name, "topics": topic, "iceberg.tables": table, "value.converter.schemas.enable": "false",
                 **warehouse.connector_props()}
    daemon = DaemonProcess(tmp_path, worker_props(bootstrap, **{"tabletopic.exit-on-connector-failure": "true"}),
                           [connector]).start()
    code = daemon.wait(180)
    assert code != 0
    assert "the Iceberg Kafka Connect sink last committed db.orphan (commit c0ffee)" in daemon.output()
    assert [int(r[0]) for r in warehouse.sql(f"SELECT count(*) FROM {{c}}.{table}")] == [1]


def test_a_control_topic_the_java_sink_writes_to_is_refused(bootstrap: str, warehouse: Warehouse,
                                                            tmp_path: Path) -> None:
    """During a migration both sinks may run: the Java one writes Avro events to its control topic and fails on
    this one's records. A connector whose control topic holds a recent Java event does not start, and says
    which key to change."""
    topic, control = unique("migrate_control"), unique("control-iceberg")
    create_topic(bootstrap, topic, 1)
    create_topic(bootstrap, control, 1)
    schema = b'{"type":"record","name":"org.apache.iceberg.connect.events.Event","fields":[]}'
    java_event = b"\xc2\x01" + len(schema).to_bytes(2, "big") + schema + b"\x00"
    produce(bootstrap, control, [(b"a-producer-id", java_event, 0)])
    connector = {"name": unique("beside_java"), "topics": topic, "iceberg.tables": "db.beside",
                 "iceberg.control.topic": control, "value.converter.schemas.enable": "false",
                 **warehouse.connector_props()}
    daemon = DaemonProcess(tmp_path, worker_props(bootstrap, **{"tabletopic.exit-on-connector-failure": "true"}),
                           [connector]).start()
    assert daemon.wait(180) != 0
    output = daemon.output()
    assert f"the control topic {control} carries the Iceberg sink's (Java) events" in output
    assert "set iceberg.control.topic to a topic of this connector's own" in output
