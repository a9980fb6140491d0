"""A connector's consumer group, kept for the tools that watch it: its committed offsets, read back, and lag.

The tables are where the sink's progress lives; the group's offsets are committed after them, so that
lag tools and Kafka's own commands see the connector as they see any consumer.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from typing import Any

import faust
from aiokafka import TopicPartition as KafkaTP
from aiokafka.errors import KafkaError

from tabletopic.buffer.partition_ledger import PartitionLedger
from tabletopic.kafka_clients import KafkaClients
from tabletopic.observe.metrics import SinkMetrics
from tabletopic.offsets.resume import lowest_recorded
from tabletopic.topic_partition import TopicPartition


async def committed_offsets(clients: KafkaClients, group: str,
                            partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
    """The consumer group's committed offsets of ``partitions``, where it holds one."""
    asked = [KafkaTP(t, p) for t, p in sorted(set(partitions))]
    if not asked:
        return {}
    admin = clients.admin()
    await admin.start()
    try:
        # Named partitions: some brokers answer an OffsetFetch for all of a group's partitions in a form
        # aiokafka cannot decode.
        found = await admin.list_consumer_group_offsets(group, partitions=asked)
    finally:
        with contextlib.suppress(KafkaError):
            await admin.close()
    return {(tp.topic, tp.partition): meta.offset for tp, meta in found.items() if meta.offset >= 0}


async def report_lag(app: faust.App, ledger: PartitionLedger, metrics: SinkMetrics, log: Any, every_s: float) -> None:
    """Lag from the fetch highwater (ListOffsets is not trusted: some brokers answer it wrongly), every ``every_s``."""
    while True:
        await asyncio.sleep(every_s)
        try:
            committed = lowest_recorded(ledger.recorded())
            for tp in list(app.consumer.assignment()):
                highwater = app.consumer.highwater(tp)
                if highwater is None or highwater < 0:
                    continue
                key = (tp.topic, tp.partition)
                position = ledger.position(key)
                labels = {"topic": tp.topic, "partition": str(tp.partition)}
                if position is not None:
                    metrics.lag.labels(**labels).set(max(0, highwater - position))
                if key in committed:
                    metrics.committed_lag.labels(**labels).set(max(0, highwater - committed[key]))
        except Exception as exc:  # metrics must never take the sink down
            log.debug("lag report failed", error=str(exc))
