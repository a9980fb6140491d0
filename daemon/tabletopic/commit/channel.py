"""The control topic's clients: one producer and one reader per connector, and nothing else.

One partition, so every member sees every message in one order.  A member reads
from the end of the topic as it was when it joined: rounds are short-lived, and
what was said before a member started is not addressed to it.  The reader skips,
counts and logs any record that is not a valid message of this connector
(:mod:`tabletopic.commit.events` decides), so one bad record never silences a
connector.  The protocol is in ``docs/design/exactly-once.md``.

The channel owns its reader task: :meth:`stop` cancels and awaits it, and if it
dies, :attr:`error_future` holds why, for the daemon to fail on.

The Iceberg sink (Java) writes Avro events to its control topic, and fails on the first record it
cannot decode. So the two cannot share one while both run: a connector refuses to start when the Java
sink wrote to its control topic in the last :data:`JAVA_SINK_RECENT_S`, and stops when a Java event
arrives later, naming ``iceberg.control.topic``. Java events older than that are left alone: a
migration stops the Java connector first, and its last events stay in the topic until retention.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable

import structlog
from aiokafka import TopicPartition
from aiokafka.errors import KafkaError

from tabletopic.commit.events import Fragment, Message, MessageError, decode, java_sink_event
from tabletopic.commit.fragments import DEFAULT_MAX_BYTES, Reassembly, encode
from tabletopic.kafka.clients import KafkaClients
from tabletopic.kafka.single_partition_topic import SinglePartitionTopic

log = structlog.get_logger(__name__)
_SEND_ATTEMPTS = 5
_SEND_BACKOFF_S = 0.5
JAVA_SINK_RECENT_S = 600  # twice the Java sink's default commit interval: a running one writes in it
_LOOK_BACK = 50  # records read back per partition at start


class ControlTopicShared(RuntimeError):
    """The Iceberg sink (Java) writes to this connector's control topic."""

    def __init__(self, topic: str, when: str) -> None:
        super().__init__(
            f"the control topic {topic} carries the Iceberg sink's (Java) events ({when}): a Java connector "
            f"writes to it. The two sinks need different control topics while both run, and each fails on the "
            f"other's records: set iceberg.control.topic to a topic of this connector's own (see "
            f"docs/lake.md, Migrating from the Iceberg Kafka Connect sink)")


class Channel:
    """The Kafka clients of the control topic: it sends events and hands those it reads to the roles.
    Runs on the event loop; owns its reader task and cancels it at close."""

    def __init__(self, clients: KafkaClients, topic: str, connector: str,
                 on_skipped: Callable[[], None] = lambda: None, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.topic = topic
        self.connector = connector
        self._max_bytes = max_bytes
        self._on_skipped = on_skipped
        # Reads allow more than one fragment, in case another writer's records are larger.
        self._clients = clients
        self._topic = SinglePartitionTopic(clients, topic, max_bytes=max(max_bytes * 2, 1024 * 1024))
        self._reader: asyncio.Task[None] | None = None
        self._fragments = Reassembly()
        self.messages: asyncio.Queue[Message] = asyncio.Queue()
        self.error_future: asyncio.Future[None] | None = None

    async def start(self) -> None:
        await self._refuse_recent_java_events()
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

    async def _refuse_recent_java_events(self) -> None:
        """Raise ControlTopicShared if the Java sink wrote to the topic lately, in any of its partitions."""
        consumer = self._clients.consumer(enable_auto_commit=False, group_id=None)
        await consumer.start()
        try:
            if self.topic not in await consumer.topics():  # also fetches the partitions of every topic
                return
            partitions = consumer.partitions_for_topic(self.topic) or set()
            tps = [TopicPartition(self.topic, p) for p in sorted(partitions)]
            consumer.assign(tps)
            ends = await consumer.end_offsets(tps)
            starts = await consumer.beginning_offsets(tps)
            waiting = {tp for tp in tps if ends[tp] > starts[tp]}
            for tp in waiting:
                consumer.seek(tp, max(starts[tp], ends[tp] - _LOOK_BACK))
            since_ms = (time.time() - JAVA_SINK_RECENT_S) * 1000
            deadline = time.monotonic() + 10
            while waiting and time.monotonic() < deadline:
                for tp, records in (await consumer.getmany(*waiting, timeout_ms=500)).items():
                    for record in records:
                        if java_sink_event(record.value) and record.timestamp >= since_ms:
                            age = time.time() - record.timestamp / 1000
                            raise ControlTopicShared(self.topic, f"one at offset {record.offset} of partition "
                                                                 f"{tp.partition}, {age:.0f} s ago")
                    if records and records[-1].offset + 1 >= ends[tp]:
                        waiting.discard(tp)
        finally:
            await consumer.stop()

    def accept(self, value: bytes | None, offset: int) -> Message | None:
        """One record: this connector's message, or None (another connector's, a fragment, or garbage)."""
        if java_sink_event(value):
            raise ControlTopicShared(self.topic, f"one arrived at offset {offset}")
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

