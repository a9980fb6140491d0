"""A single-partition Kafka topic that a daemon both writes and reads, in one order for every reader.

The control topic, the schemas topic and distributed mode's config and status topics
are all of this kind: created on first use, one producer, and one consumer assigned to
partition 0 without a group.  :class:`TopicLog` reads one into a state.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import NewTopic
from aiokafka.errors import KafkaError, TopicAlreadyExistsError

from tabletopic.kafka.clients import KafkaClients

_STOP_TIMEOUT_S = 10.0


class SinglePartitionTopic:
    def __init__(self, clients: KafkaClients, topic: str, configs: dict[str, str] | None = None,
                 max_bytes: int | None = None, replication: int = 1) -> None:
        self.topic = topic
        self._replication = replication
        self.tp = TopicPartition(topic, 0)
        self._clients = clients
        self._configs = configs or {}
        self._max_bytes = max_bytes  # the largest message sent or read, when above the clients' defaults
        self._producer: AIOKafkaProducer | None = None
        self._consumer: AIOKafkaConsumer | None = None

    @property
    def producer(self) -> AIOKafkaProducer:
        assert self._producer is not None, "open() first"
        return self._producer

    @property
    def consumer(self) -> AIOKafkaConsumer:
        assert self._consumer is not None, "open() first"
        return self._consumer

    async def open(self, from_end: bool) -> None:
        """Create the topic if missing; read it from its beginning, or from its end as it is now."""
        admin = self._clients.admin()
        await admin.start()
        try:
            with contextlib.suppress(TopicAlreadyExistsError):
                await admin.create_topics([NewTopic(self.topic, 1, self._replication, topic_configs=self._configs)])
        finally:
            await admin.close()
        sizes = {} if self._max_bytes is None else {"fetch_max_bytes": self._max_bytes,
                                                    "max_partition_fetch_bytes": self._max_bytes}
        self._producer = self._clients.producer(acks="all", linger_ms=0,
                                                **({} if self._max_bytes is None else
                                                   {"max_request_size": self._max_bytes}))
        await self._producer.start()
        # A short long-poll: a ListOffsets request (catch_up) waits behind the fetch in flight on the same
        # connection, so aiokafka's 500 ms default made every registry miss and catch-up take 0.5 s. At
        # 100 ms one takes 0.1 s at most, and an idle log costs ten empty fetches a second.
        self._consumer = self._clients.consumer(enable_auto_commit=False, group_id=None, fetch_max_wait_ms=100,
                                                auto_offset_reset="latest" if from_end else "earliest", **sizes)
        await self._consumer.start()
        self._consumer.assign([self.tp])
        if from_end:
            await self._consumer.seek_to_end(self.tp)
            await self._consumer.position(self.tp)  # pin "the end" now, before anything is sent
        else:
            await self._consumer.seek_to_beginning(self.tp)

    async def close(self) -> None:
        for client in (self._consumer, self._producer):
            if client is not None:
                with contextlib.suppress(KafkaError, asyncio.TimeoutError):
                    await asyncio.wait_for(client.stop(), _STOP_TIMEOUT_S)


Apply = Callable[[bytes | None, bytes | None, int], None]


class TopicLog:
    """A state every reader rebuilds alike from one compacted topic: the schemas topic, and the config and
    status topics of distributed mode.

    One task reads the topic from its beginning for as long as the log is open and hands each
    record to ``apply``.  Writers append, then wait until that reader has applied their record, so a
    reply goes out only once the change is in this daemon's state too.
    """

    def __init__(self, clients: KafkaClients, topic: str, apply: Apply, replication: int = 1,
                 max_bytes: int | None = None) -> None:
        self.topic = topic
        self._apply = apply
        self._topic = SinglePartitionTopic(clients, topic, configs={"cleanup.policy": "compact"},
                                           replication=replication, max_bytes=max_bytes)
        self._reader: asyncio.Task[None] | None = None
        self._applied = -1  # offset of the last record applied
        self._progress = asyncio.Condition()

    async def start(self, timeout_s: float = 30.0) -> None:
        await self._topic.open(from_end=False)
        self._reader = asyncio.get_running_loop().create_task(self._read(), name=f"log-{self.topic}")
        await self.catch_up(timeout_s)

    async def stop(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        await self._topic.close()

    @property
    def failed(self) -> BaseException | None:
        """Why the reader stopped, if it did: the state no longer follows the topic."""
        if self._reader is None or not self._reader.done() or self._reader.cancelled():
            return None
        return self._reader.exception() or RuntimeError(f"the reader of {self.topic} ended")

    async def _read(self) -> None:
        tp = self._topic.tp
        while True:
            batches = await self._topic.consumer.getmany(tp, timeout_ms=200)
            for record in batches.get(tp, []):
                self._apply(record.key, record.value, record.offset)
                self._applied = record.offset
            async with self._progress:
                self._progress.notify_all()

    async def catch_up(self, timeout_s: float = 10.0) -> None:
        """Wait until everything in the topic now has been applied (other daemons' writes too)."""
        tp = self._topic.tp
        end = (await self._topic.consumer.end_offsets([tp]))[tp]
        await self._wait(lambda: self._applied >= end - 1, timeout_s)

    async def append(self, records: list[tuple[bytes, bytes | None]], timeout_s: float = 10.0) -> None:
        last = -1
        for key, value in records:
            meta = await self._topic.producer.send_and_wait(self.topic, key=key, value=value, partition=0)
            last = meta.offset
        await self._wait(lambda: self._applied >= last, timeout_s)

    async def _wait(self, condition: Callable[[], bool], timeout_s: float) -> None:
        async def reached() -> None:
            async with self._progress:
                await self._progress.wait_for(lambda: condition() or self.failed is not None)
            if not condition():
                raise RuntimeError(f"the reader of {self.topic} stopped: {self.failed!r}")
        await asyncio.wait_for(reached(), timeout_s)
