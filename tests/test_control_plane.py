"""The control topic under hostile and heavy traffic, through the real broker and tables."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from tabletopic.write.spark_session import SparkRuntime
from tests.support import Warehouse, connector_props, create_topic, produce, run_in_process, unique, worker_props


async def _control_records(bootstrap: str, topic: str) -> list[tuple[int, dict[str, Any] | None, int]]:
    """Every record of the control topic: its offset, its JSON object (None if not one) and its size."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                enable_auto_commit=False, group_id=None, fetch_max_bytes=64 * 1024 * 1024,
                                max_partition_fetch_bytes=64 * 1024 * 1024)
    await consumer.start()
    consumer.assign([TopicPartition(topic, 0)])
    out: list[tuple[int, dict[str, Any] | None, int]] = []
    try:
        tp = TopicPartition(topic, 0)
        end = (await consumer.end_offsets([tp]))[tp]  # the daemon keeps writing: read what is there now
        while await consumer.position(tp) < end:
            for records in (await consumer.getmany(timeout_ms=1000)).values():
                for r in records:
                    try:
                        doc = json.loads(r.value)
                    except (ValueError, RecursionError):
                        doc = None
                    out.append((r.offset, doc if isinstance(doc, dict) else None, len(r.value or b"")))
        return out
    finally:
        await consumer.stop()


async def _send(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, max_request_size=8 * 1024 * 1024)
    await producer.start()
    try:
        for value in values:
            await producer.send_and_wait(topic, value, partition=0)
    finally:
        await producer.stop()


def test_malformed_forged_and_replayed_control_records_change_nothing(bootstrap: str, spark: SparkRuntime,
                                                                      warehouse: Warehouse) -> None:
    topic, table, control = unique("hostile"), "hostile.events", unique("control")
    create_topic(bootstrap, topic, 2)
    connector = connector_props("hostile", topic, table, warehouse, {
        "iceberg.control.topic": control, "value.converter.schemas.enable": "false",
        "iceberg.tables.auto-create-enabled": "true", "iceberg.control.commit.interval-ms": "1000",
        "iceberg.control.commit.timeout-ms": "600000"})
    name = connector["name"]

    def wave(first: int) -> None:
        produce(bootstrap, topic, [(None, json.dumps({"id": i}).encode(), i % 2) for i in range(first, first + 100)])

    async def attack(daemon: Any) -> None:
        task = daemon.connectors[0].task
        await asyncio.to_thread(wave, 0)
        while sum(task.committed_offsets(table).values()) < 100:
            await asyncio.sleep(0.2)
        records = await _control_records(bootstrap, control)
        real = next(doc for _, doc, _ in records if doc and doc.get("type") == "answer" and doc.get("tables"))
        replay = {**real, "answer_id": "replayed", "ranges": []}  # the same files again, claiming no offsets
        forged = {"v": 1, "type": "start", "connector": name, "commit_id": "forged", "epoch": 2**31 - 1}
        await _send(bootstrap, control, [b"[" * 100_000, b"[1, 2, 3]", json.dumps(forged).encode(),
                                         json.dumps(replay).encode()])
        await asyncio.to_thread(wave, 100)

    code, daemon = run_in_process(
        spark, worker_props(bootstrap), [connector], during=attack,
        until=lambda d: sum(d.connectors[0].task.committed_offsets(table).values()) >= 200)
    assert code == 0
    # With a 10-minute round timeout, reaching 200 proves the rounds kept completing after the attack.
    ids = [r.id for r in warehouse.rows(table, "id")]
    assert sorted(ids) == list(range(200))  # the replayed files added nothing
    member = daemon.connectors[0].member
    assert member.coordinator.epoch >= 0 and member.worker.max_epoch == member.coordinator.epoch
    epochs = {s["summary"].get(f"tabletopic.coordinator-epoch.connect-{name}") for s in warehouse.snapshots(table)}
    assert str(2**31 - 1) not in epochs
    verdicts = [doc for _, doc, _ in asyncio.run(_control_records(bootstrap, control))
                if doc and doc.get("type") == "verdict"]
    assert any("files without offset ranges" in v["rejected"].get("replayed", "") for v in verdicts)
    skipped = daemon.registry.get_sample_value("tabletopic_control_messages_skipped_total", {"connector": name})
    assert skipped is not None and skipped >= 3  # the deep nesting, the array and the forged start


@pytest.mark.slow
def test_an_answer_larger_than_a_kafka_message_commits_in_fragments(bootstrap: str, spark: SparkRuntime,
                                                                   warehouse: Warehouse) -> None:
    topic, table, control = unique("wide"), "wide.events", unique("control")
    create_topic(bootstrap, topic, 1)
    total = 6000
    produce(bootstrap, topic, [(None, json.dumps({"id": i, "v": f"value-{i}"}).encode(), 0) for i in range(total)])
    connector = connector_props("wide", topic, table, warehouse, {
        "iceberg.control.topic": control, "value.converter.schemas.enable": "false",
        "iceberg.tables.auto-create-enabled": "true", f"iceberg.table.{table}.partition-by": "bucket(id, 2000)",
        "iceberg.control.commit.interval-ms": "3000"})
    code, _ = run_in_process(spark, worker_props(bootstrap), [connector], timeout=300,
                             until=lambda d: sum(d.connectors[0].task.committed_offsets(table).values()) >= total)
    assert code == 0
    count, distinct, checksum = warehouse.sql(f"SELECT count(*), count(DISTINCT id), sum(id) FROM {{c}}.{table}")[0]
    assert (count, distinct, checksum) == (total, total, total * (total - 1) // 2)
    records = asyncio.run(_control_records(bootstrap, control))
    fragments = [doc for _, doc, _ in records if doc and doc.get("type") == "fragment"]
    assert fragments, "the answer for 2000 buckets should not fit one record"
    assert max(size for _, _, size in records) < 1024 * 1024  # every record fits the broker's default limit
    # Every bucket holding rows is at least one file, and each file came through a fragmented answer.
    files = sum(int(s["summary"].get("added-data-files", 0)) for s in warehouse.snapshots(table))
    buckets = warehouse.sql(f"SELECT count(DISTINCT {{c}}.system.bucket(2000, id)) FROM {{c}}.{table}")[0][0]
    live = warehouse.sql(f"SELECT count(*) FROM {{c}}.{table}.files")[0][0]
    assert buckets > 1500 and files == live >= buckets
