"""The control topic's clients: one producer and one reader per connector, and nothing else.

One partition, so every member sees every message in one order.  A member reads
from the end of the topic as it was when it joined: rounds are short-lived, and
what was said before a member started is not addressed to it.  The reader skips,
counts and logs any record that is not a valid message of this connector
(:mod:`tabletopic.commit.events` decides), so one bad record never silences a
connector.  The protocol is in ``docs/design/exactly-once.md``.

The channel owns its reader task: :meth:`stop` cancels and awaits it, and if it
dies, :attr:`error_future` holds why, for the daemon to fail on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable

import structlog
from aiokafka.errors import KafkaError

from tabletopic.commit.events import Fragment, Message, MessageError, decode
from tabletopic.commit.fragments import DEFAULT_MAX_BYTES, Reassembly, encode
from tabletopic.kafka_clients import KafkaClients
from tabletopic.single_partition_topic import SinglePartitionTopic

log = structlog.get_logger(__name__)
_SEND_ATTEMPTS = 5
_SEND_BACKOFF_S = 0.5


class Channel:
    def __init__(self, clients: KafkaClients, topic: str, connector: str,
                 on_skipped: Callable[[], None] = lambda: None, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.topic = topic
        self.connector = connector
        self._max_bytes = max_bytes
        self._on_skipped = on_skipped
        # Reads allow more than one fragment, in case another writer's records are larger.
        self._topic = SinglePartitionTopic(clients, topic, max_bytes=max(max_bytes * 2, 1024 * 1024))
        self._reader: asyncio.Task[None] | None = None
        self._fragments = Reassembly()
        self.messages: asyncio.Queue[Message] = asyncio.Queue()
        self.error_future: asyncio.Future[None] | None = None

    async def start(self) -> None:
        await self._topic.open(from_end=True)
        loop = asyncio.get_running_loop()
        self.error_future = loop.create_future()
        self._reader = loop.create_task(self._read(), name=f"control-reader-{self.connector}")
        self._reader.add_done_callback(self._on_reader_done)

    async def stop(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        await self._topic.close()

    def _on_reader_done(self, task: asyncio.Task[None]) -> None:
        if self.error_future is None or self.error_future.done() or task.cancelled():
            return
        error = task.exception() or RuntimeError("the control topic reader ended")
        self.error_future.set_exception(error)

    async def send(self, message: Message) -> None:
        """Send one message (as fragments if it is large), retrying a failed send a few times."""
        for attempt in range(1, _SEND_ATTEMPTS + 1):
            try:
                for record in encode(message, self._max_bytes):
                    await self._topic.producer.send_and_wait(self.topic, record, key=self.connector.encode(),
                                                             partition=0)
                return
            except (KafkaError, asyncio.TimeoutError) as exc:
                if attempt == _SEND_ATTEMPTS:
                    raise
                log.warning("control message not sent; retrying", topic=self.topic, attempt=attempt,
                            error=str(exc) or type(exc).__name__)
                await asyncio.sleep(_SEND_BACKOFF_S * attempt)

    async def _read(self) -> None:
        tp = self._topic.tp
        while True:
            batches = await self._topic.consumer.getmany(tp, timeout_ms=500)
            for record in batches.get(tp, []):
                message = self.accept(record.value, record.offset)
                if message is not None:
                    self.messages.put_nowait(message)

    def accept(self, value: bytes | None, offset: int) -> Message | None:
        """One record: this connector's message, or None (another connector's, a fragment, or garbage)."""
        try:
            message = decode(value)
            if message.connector != self.connector:
                return None
            if isinstance(message, Fragment):
                return self._fragments.add(message)
            return message
        except MessageError as exc:
            if _names_connector(value, self.connector):
                self._on_skipped()
                log.warning("skipped a control record that is not a valid message", topic=self.topic,
                            offset=offset, connector=self.connector, error=str(exc))
            return None


def _names_connector(value: bytes | None, connector: str) -> bool:
    """Whether a bad record may concern us: not if it is an object that names another connector."""
    try:
        doc = json.loads(value) if value else None
    except (ValueError, RecursionError):
        return True
    return not isinstance(doc, dict) or doc.get("connector") in (None, connector)
