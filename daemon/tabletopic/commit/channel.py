"""The control topic: how a connector's workers and its coordinator talk, across daemons.

One partition, so every member sees every event in one order.  Events are JSON
with the connector's name, so connectors may share the topic, as they share
``control-iceberg`` in Kafka Connect.  A member reads from the end of the topic
as it was when it joined: barriers are short-lived, and what was said before a
member started is not addressed to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import structlog
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError, TopicAlreadyExistsError

log = structlog.get_logger(__name__)
Event = dict[str, Any]


class ControlChannel:
    def __init__(self, bootstrap: list[str], topic: str, connector: str) -> None:
        self.topic = topic
        self.connector = connector
        self._bootstrap = bootstrap
        self._tp = TopicPartition(topic, 0)
        self._producer: AIOKafkaProducer | None = None
        self._consumer: AIOKafkaConsumer | None = None
        self._reader: asyncio.Task[None] | None = None
        self.events: asyncio.Queue[Event] = asyncio.Queue()

    async def start(self) -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=self._bootstrap)
        await admin.start()
        try:
            with contextlib.suppress(TopicAlreadyExistsError):
                await admin.create_topics([NewTopic(self.topic, 1, 1)])
        finally:
            await admin.close()
        self._producer = AIOKafkaProducer(bootstrap_servers=self._bootstrap, acks="all", linger_ms=0,
                                          max_request_size=64 * 1024 * 1024)
        await self._producer.start()
        self._consumer = AIOKafkaConsumer(bootstrap_servers=self._bootstrap, enable_auto_commit=False,
                                          group_id=None, fetch_max_bytes=64 * 1024 * 1024,
                                          max_partition_fetch_bytes=64 * 1024 * 1024)
        await self._consumer.start()
        self._consumer.assign([self._tp])
        await self._consumer.seek_to_end(self._tp)
        await self._consumer.position(self._tp)  # pin "the end" now, before anything is sent
        self._reader = asyncio.get_running_loop().create_task(self._read(), name=f"control-{self.connector}")

    async def stop(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        for client in (self._consumer, self._producer):
            if client is not None:
                with contextlib.suppress(KafkaError, asyncio.TimeoutError):
                    await asyncio.wait_for(client.stop(), 10)

    async def send(self, event: Event) -> None:
        assert self._producer is not None, "start() first"
        body = json.dumps({**event, "connector": self.connector}, separators=(",", ":")).encode()
        await self._producer.send_and_wait(self.topic, body, key=self.connector.encode(), partition=0)

    async def _read(self) -> None:
        assert self._consumer is not None
        while True:
            batches = await self._consumer.getmany(self._tp, timeout_ms=500)
            for record in batches.get(self._tp, []):
                try:
                    event = json.loads(record.value) if record.value else None
                except ValueError:
                    log.warning("unreadable control event", topic=self.topic, offset=record.offset)
                    continue
                if isinstance(event, dict) and event.get("connector") == self.connector:
                    self.events.put_nowait(event)
