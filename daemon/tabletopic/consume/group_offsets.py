"""A connector's consumer group, kept for the tools that watch it: its committed offsets, read back, and lag.

The tables are where the sink's progress lives; the group's offsets are committed after them, so that
lag tools and Kafka's own commands see the connector as they see any consumer.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import faust
from aiokafka import TopicPartition as KafkaTP
from aiokafka.errors import KafkaError

from tabletopic.buffer.partition_ledger import PartitionLedger
from tabletopic.core.topic_partition import TopicPartition
from tabletopic.kafka.clients import KafkaClients
from tabletopic.observe.metrics import SinkMetrics
from tabletopic.offsets.resume import lowest_recorded


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


class GroupOffsetCommits:
    """Commits the group's offsets after the tables', one commit at a time, in a task of its own.

    Awaited inline, a commit held the round that had just committed behind a broker's answer, and a
    stop could close the consumer under one: aiokafka shields its commit request from its caller, so
    the request then failed in a task nobody awaited. Offsets handed in while one is under way are
    merged (the highest per partition) and go in the next. :meth:`close` waits for both before the
    consumer stops.
    """

    def __init__(self, commit: Callable[[dict[TopicPartition, int]], Awaitable[None]], log: Any) -> None:
        self._commit = commit
        self._log = log
        self._pending: dict[TopicPartition, int] = {}
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    def submit(self, positions: dict[TopicPartition, int]) -> None:
        """Commit ``positions`` (everything below them is in the tables) once the commit under way is done."""
        if self._closed or not positions:
            return
        self._merge(positions)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="group-offsets")

    async def _run(self) -> None:
        while self._pending:
            offsets, self._pending = self._pending, {}
            try:
                await self._commit(offsets)
            except Exception as exc:  # lag tools only: the tables hold the truth
                self._log.warning("could not commit consumer group offsets; the next round's commit takes them",
                                  error=str(exc) or type(exc).__name__)
                self._merge(offsets)
                return

    def _merge(self, offsets: dict[TopicPartition, int]) -> None:
        for tp, offset in offsets.items():
            self._pending[tp] = max(offset, self._pending.get(tp, offset))

    async def close(self, timeout_s: float) -> None:
        """Take no more; wait up to ``timeout_s`` for what was handed in, then give it up."""
        self._closed = True
        task = self._task
        if task is None:
            return
        done, _ = await asyncio.wait({task}, timeout=timeout_s)
        if not done:
            self._log.warning("consumer group offsets still uncommitted at stop; lag tools see the older ones",
                              waited_s=timeout_s)
            task.cancel()
        await asyncio.gather(task, return_exceptions=True)


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
