"""What happens to a record that fails conversion, a transform, routing or its table's schema.

``errors.tolerance=none`` (Connect's default): the sink stops with a
:class:`RecordFailed` naming the topic, partition, offset and reason.  Nothing
of that batch is buffered, so no offset at or past the record is committed.

``errors.tolerance=all``: the record is skipped, logged if ``errors.log.enable``,
and, with ``errors.deadletterqueue.topic.name``, produced to that topic as it
came in, with Connect's ``__connect.errors.*`` headers when
``errors.deadletterqueue.context.headers.enable`` is true. As Connect does, the topic is created at
start when it is missing: one partition, ``errors.deadletterqueue.topic.replication.factor`` replicas.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import structlog
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import MessageSizeTooLargeError, TopicAlreadyExistsError

from tabletopic.config.connector import ConnectorConfig
from tabletopic.convert.records import RawRecords
from tabletopic.observe.metrics import SinkMetrics

log = structlog.get_logger(__name__)
_DLQ_MAX = 64 * 1024 * 1024


@dataclass(frozen=True)
class RecordFailure:
    stage: str  # convert, transform, route, schema
    index: int  # position in the RawRecords
    reason: str
    exception_class: str = "org.apache.kafka.connect.errors.DataException"


class RecordFailed(RuntimeError):
    """A record failed with errors.tolerance=none; the connector stops before committing past it."""

    def __init__(self, connector: str, topic: str, partition: int, offset: int, stage: str, reason: str) -> None:
        self.topic, self.partition, self.offset = topic, partition, offset
        super().__init__(
            f"connector {connector}: record {topic}[{partition}]@{offset} failed in {stage}: {reason}. "
            f"No offset at or after it was committed. To go on, fix the producer or the configuration and "
            f"restart; or set errors.tolerance=all (with errors.deadletterqueue.topic.name to keep the record) "
            f"and restart, which moves such records aside."
        )


class DeadLetterTopicError(RuntimeError):
    """The dead-letter topic is missing and cannot be created: the connector does not start, as in Connect."""


async def _broker_default_replication(admin: AIOKafkaAdminClient) -> int:
    """The brokers' ``default.replication.factor``, for a replication factor of -1 (aiokafka's CreateTopics
    cannot ask for the broker's default itself); 1 if the broker does not say."""
    with contextlib.suppress(Exception):  # a broker that does not describe its configs: take the safe 1
        metadata = await admin.describe_cluster()
        broker = str(metadata["controller_id"])
        (response,) = await admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, broker)])
        for resource in response.resources:
            for entry in resource[4]:
                if entry[0] == "default.replication.factor" and entry[1]:
                    return int(entry[1])
    return 1


@dataclass(frozen=True)
class ErrorSettings:
    """Connect's ``errors.*`` keys, as the failed records use them."""

    connector: str
    tolerance: str  # errors.tolerance: "none" or "all"
    log_enable: bool  # errors.log.enable
    log_include_messages: bool  # errors.log.include.messages
    dlq_topic: str | None  # errors.deadletterqueue.topic.name
    dlq_context_headers: bool  # errors.deadletterqueue.context.headers.enable
    dlq_replication: int  # errors.deadletterqueue.topic.replication.factor; -1: the broker's default

    @classmethod
    def of(cls, config: ConnectorConfig) -> ErrorSettings:
        return cls(config.name, config.errors_tolerance, config.errors_log_enable, config.errors_log_include_messages,
                   config.dlq_topic, config.dlq_context_headers, config.dlq_replication)


class DeadLetterClients(Protocol):
    """What the dead-letter topic needs of the connector's Kafka clients (:class:`KafkaClients`)."""

    def kwargs(self, role: str) -> dict[str, Any]: ...

    def admin(self) -> AIOKafkaAdminClient: ...

    def producer(self, **overrides: Any) -> AIOKafkaProducer: ...


class FailedRecords:
    def __init__(self, config: ErrorSettings, metrics: SinkMetrics, clients: DeadLetterClients) -> None:
        self._config = config
        self._metrics = metrics
        self._clients = clients
        self._producer: AIOKafkaProducer | None = None

    @property
    def tolerant(self) -> bool:
        return self._config.tolerance == "all"

    async def start(self) -> None:
        if self.tolerant and self._config.dlq_topic:
            await self._create_topic(self._config.dlq_topic)
            # Not idempotent: some brokers reject InitProducerId, and a duplicate in the DLQ is harmless
            # next to a lost record.
            # A failed record may be as big as the source topic allowed: the broker's own limit decides.
            size = {} if "max_request_size" in self._clients.kwargs("producer") else {"max_request_size": _DLQ_MAX}
            self._producer = self._clients.producer(acks="all", enable_idempotence=False, linger_ms=5, **size)
            await self._producer.start()

    async def _create_topic(self, topic: str) -> None:
        admin = self._clients.admin()
        await admin.start()
        try:
            if topic in await admin.list_topics():
                return
            replicas = self._config.dlq_replication
            if replicas == -1:
                replicas = await _broker_default_replication(admin)
            response = await admin.create_topics([NewTopic(topic, 1, replicas)])
            for name, code, message in response.topic_errors:
                if code not in (0, TopicAlreadyExistsError.errno):
                    raise DeadLetterTopicError(
                        f"cannot create the dead-letter topic {name} with {replicas} replicas (error {code}: "
                        f"{message}); create it, or set errors.deadletterqueue.topic.replication.factor")
            log.info("created the dead-letter topic", connector=self._config.connector, topic=topic,
                     replication_factor=replicas)
        finally:
            await admin.close()

    async def stop(self) -> None:
        if self._producer is not None:
            await self._producer.stop()
            self._producer = None

    async def handle(self, raw: RawRecords, failures: Sequence[RecordFailure]) -> None:
        """Raise for the first failure under tolerance none; otherwise log and dead-letter each."""
        if not failures:
            return
        first = min(failures, key=lambda f: f.index)
        for failure in failures:
            self._metrics.failed_records.labels(stage=failure.stage).inc()
        if not self.tolerant:
            raise RecordFailed(self._config.connector, raw.topic, raw.partition, raw.offsets[first.index],
                               first.stage, first.reason)
        sends = []
        for failure in sorted(failures, key=lambda f: f.index):
            offset = raw.offsets[failure.index]
            if self._config.log_enable:
                extra = {}
                if self._config.log_include_messages:
                    extra = {"key": _show(raw.keys[failure.index]), "value": _show(raw.values[failure.index])}
                log.warning("record skipped (errors.tolerance=all)", topic=raw.topic, partition=raw.partition,
                            offset=offset, stage=failure.stage, reason=failure.reason, **extra)
            if self._producer is not None and self._config.dlq_topic:
                headers = list(raw.headers[failure.index])
                if self._config.dlq_context_headers:
                    headers += self._context_headers(raw, failure, offset)
                sends.append((await self._send(raw.values[failure.index], raw.keys[failure.index], headers,
                                               raw.timestamps[failure.index]), raw, failure.index, headers))
        for sent, source, index, headers in sends:
            try:
                await sent  # the batch is not buffered past these records until the DLQ has them
            except MessageSizeTooLargeError:
                await (await self._too_large(source, index, headers))
        if sends:
            self._metrics.dead_letter_records.inc(len(sends))

    async def _send(self, value: bytes | None, key: bytes | None, headers: list[tuple[str, bytes]],
                    timestamp_ms: int) -> asyncio.Future[object]:
        assert self._producer is not None and self._config.dlq_topic
        try:
            return await self._producer.send(self._config.dlq_topic, value=value, key=key, headers=headers,
                                             timestamp_ms=timestamp_ms)
        except MessageSizeTooLargeError:
            future: asyncio.Future[object] = asyncio.get_running_loop().create_future()
            future.set_exception(MessageSizeTooLargeError())
            return future

    async def _too_large(self, raw: RawRecords, index: int, headers: list[tuple[str, bytes]]) -> asyncio.Future[object]:
        """The dead-letter topic refuses the record's size: send it without its value, saying where it is."""
        size = len(raw.values[index] or b"")
        log.error("failed record too large for the dead-letter topic; sent without its value", topic=raw.topic,
                  partition=raw.partition, offset=raw.offsets[index], value_bytes=size)
        headers = [*headers, ("__tabletopic.errors.value.dropped.bytes", str(size).encode()),
                   ("__tabletopic.errors.source", f"{raw.topic}[{raw.partition}]@{raw.offsets[index]}".encode())]
        return await self._send(None, raw.keys[index], headers, raw.timestamps[index])

    def _context_headers(self, raw: RawRecords, failure: RecordFailure, offset: int) -> list[tuple[str, bytes]]:
        pairs = {
            "__connect.errors.topic": raw.topic,
            "__connect.errors.partition": str(raw.partition),
            "__connect.errors.offset": str(offset),
            "__connect.errors.connector.name": self._config.connector,
            "__connect.errors.task.id": "0",
            "__connect.errors.stage": {"convert": "VALUE_CONVERTER", "transform": "TRANSFORMATION",
                                       "route": "TASK_PUT", "schema": "TASK_PUT"}.get(failure.stage, "TASK_PUT"),
            "__connect.errors.class.name": "tabletopic",
            "__connect.errors.exception.class.name": failure.exception_class,
            "__connect.errors.exception.message": failure.reason,
            "__connect.errors.timestamp": str(int(time.time() * 1000)),
        }
        return [(k, v.encode()) for k, v in pairs.items()]


def _show(data: bytes | None, limit: int = 512) -> str | None:
    if data is None:
        return None
    return data[:limit].decode("utf-8", errors="replace")
