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

from tabletopic.single_partition_topic import SinglePartitionTopic

log = structlog.get_logger(__name__)
Event = dict[str, Any]


class ControlChannel:
    def __init__(self, bootstrap: list[str], topic: str, connector: str) -> None:
        self.topic = topic
        self.connector = connector
        self._topic = SinglePartitionTopic(bootstrap, topic, max_bytes=64 * 1024 * 1024)  # answers carry file lists
        self._reader: asyncio.Task[None] | None = None
        self.events: asyncio.Queue[Event] = asyncio.Queue()

    async def start(self) -> None:
        await self._topic.open(from_end=True)
        self._reader = asyncio.get_running_loop().create_task(self._read(), name=f"control-{self.connector}")

    async def stop(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        await self._topic.close()

    async def send(self, event: Event) -> None:
        body = json.dumps({**event, "connector": self.connector}, separators=(",", ":")).encode()
        await self._topic.producer.send_and_wait(self.topic, body, key=self.connector.encode(), partition=0)

    async def _read(self) -> None:
        tp = self._topic.tp
        while True:
            batches = await self._topic.consumer.getmany(tp, timeout_ms=500)
            for record in batches.get(tp, []):
                try:
                    event = json.loads(record.value) if record.value else None
                except ValueError:
                    log.warning("unreadable control event", topic=self.topic, offset=record.offset)
                    continue
                if isinstance(event, dict) and event.get("connector") == self.connector:
                    self.events.put_nowait(event)
