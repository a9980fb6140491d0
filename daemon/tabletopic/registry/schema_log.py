"""The schemas topic: one compacted, single-partition Kafka topic holding every registry change.

A single partition gives every reader the same order, which is what lets
racing writers be resolved the same way everywhere (see ``schema_store``).
One task reads the topic for as long as the registry runs; writers append,
then wait until that reader has applied their record, so a reply is only
sent once the change is in this daemon's state.
"""

from __future__ import annotations

import asyncio
import contextlib
import json

import structlog

from tabletopic.kafka_clients import KafkaClients
from tabletopic.registry.schema_store import SchemaStore, Write
from tabletopic.single_partition_topic import SinglePartitionTopic

log = structlog.get_logger(__name__)


class SchemaLog:
    def __init__(self, clients: KafkaClients, topic: str, store: SchemaStore) -> None:
        self.topic = topic
        self.store = store
        self._topic = SinglePartitionTopic(clients, topic, configs={"cleanup.policy": "compact"})
        self._reader: asyncio.Task[None] | None = None
        self._applied = -1  # offset of the last record applied
        self._progress = asyncio.Condition()

    async def start(self, timeout_s: float = 30.0) -> None:
        await self._topic.open(from_end=False)
        self._reader = asyncio.get_running_loop().create_task(self._read(), name=f"schema-log-{self.topic}")
        await self.catch_up(timeout_s)
        log.info("schemas loaded", topic=self.topic, subjects=len(self.store.subjects),
                 schemas=len(self.store.schemas))

    async def stop(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        await self._topic.close()

    async def _read(self) -> None:
        tp = self._topic.tp
        while True:
            batches = await self._topic.consumer.getmany(tp, timeout_ms=200)
            for record in batches.get(tp, []):
                self._apply(record.key, record.value, record.offset)
            async with self._progress:
                self._progress.notify_all()

    def _apply(self, key: bytes | None, value: bytes | None, offset: int) -> None:
        try:
            parsed_key = json.loads(key) if key else None
            parsed_value = json.loads(value) if value is not None else None
            if not isinstance(parsed_key, dict) or not (parsed_value is None or isinstance(parsed_value, dict)):
                raise TypeError("the key and the value must be JSON objects (or the value null)")
            self.store.apply(parsed_key, parsed_value)
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
            # A record this version cannot read must not stop the registry; say so loudly.
            log.error("skipped an unreadable record in the schemas topic", topic=self.topic, offset=offset,
                      error=str(exc)[:200])
        self._applied = offset

    async def catch_up(self, timeout_s: float = 10.0) -> None:
        """Wait until everything in the topic now has been applied (other daemons' writes too)."""
        tp = self._topic.tp
        end = (await self._topic.consumer.end_offsets([tp]))[tp]
        await self._wait_applied(end - 1, timeout_s)

    async def append(self, writes: list[Write], timeout_s: float = 10.0) -> None:
        last = -1
        for w in writes:
            meta = await self._topic.producer.send_and_wait(
                self.topic, key=json.dumps(w.key, sort_keys=True).encode(),
                value=None if w.value is None else json.dumps(w.value).encode(), partition=0)
            last = meta.offset
        await self._wait_applied(last, timeout_s)

    async def _wait_applied(self, offset: int, timeout_s: float) -> None:
        async def reached() -> None:
            async with self._progress:
                await self._progress.wait_for(lambda: self._applied >= offset or self._reader_failed())
            if self._reader_failed() and self._applied < offset:
                assert self._reader is not None
                raise RuntimeError(f"the schemas topic reader stopped: {self._reader.exception()!r}")
        await asyncio.wait_for(reached(), timeout_s)

    def _reader_failed(self) -> bool:
        return self._reader is not None and self._reader.done()

