"""What happens to a record that fails conversion, a transform, routing or its table's schema.

``errors.tolerance=none`` (Connect's default): the sink stops with a
:class:`RecordFailed` naming the topic, partition, offset and reason.  Nothing
of that batch is buffered, so no offset at or past the record is committed.

``errors.tolerance=all``: the record is skipped, logged if ``errors.log.enable``,
and, with ``errors.deadletterqueue.topic.name``, produced to that topic as it
came in, with Connect's ``__connect.errors.*`` headers when
``errors.deadletterqueue.context.headers.enable`` is true.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import structlog
from aiokafka import AIOKafkaProducer

from tabletopic.config.connector import ConnectorConfig
from tabletopic.convert.records import RawRecords
from tabletopic.kafka_clients import KafkaClients
from tabletopic.ops.metrics import SinkMetrics

log = structlog.get_logger(__name__)


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


class FailedRecords:
    def __init__(self, config: ConnectorConfig, metrics: SinkMetrics, clients: KafkaClients) -> None:
        self._config = config
        self._metrics = metrics
        self._clients = clients
        self._producer: AIOKafkaProducer | None = None

    @property
    def tolerant(self) -> bool:
        return self._config.errors_tolerance == "all"

    async def start(self) -> None:
        if self.tolerant and self._config.dlq_topic:
            # Not idempotent: some brokers reject InitProducerId, and a duplicate in the DLQ is harmless
            # next to a lost record.
            self._producer = self._clients.producer(acks="all", enable_idempotence=False, linger_ms=5)
            await self._producer.start()

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
            raise RecordFailed(self._config.name, raw.topic, raw.partition, raw.offsets[first.index],
                               first.stage, first.reason)
        sends = []
        for failure in sorted(failures, key=lambda f: f.index):
            offset = raw.offsets[failure.index]
            if self._config.errors_log_enable:
                extra = {}
                if self._config.errors_log_include_messages:
                    extra = {"key": _show(raw.keys[failure.index]), "value": _show(raw.values[failure.index])}
                log.warning("record skipped (errors.tolerance=all)", topic=raw.topic, partition=raw.partition,
                            offset=offset, stage=failure.stage, reason=failure.reason, **extra)
            if self._producer is not None and self._config.dlq_topic:
                headers = list(raw.headers[failure.index])
                if self._config.dlq_context_headers:
                    headers += self._context_headers(raw, failure, offset)
                sends.append(await self._producer.send(
                    self._config.dlq_topic, value=raw.values[failure.index], key=raw.keys[failure.index],
                    headers=headers, timestamp_ms=raw.timestamps[failure.index]))
        for sent in sends:
            await sent  # the batch is not buffered past these records until the DLQ has them
        if sends:
            self._metrics.dead_letter_records.inc(len(sends))

    def _context_headers(self, raw: RawRecords, failure: RecordFailure, offset: int) -> list[tuple[str, bytes]]:
        pairs = {
            "__connect.errors.topic": raw.topic,
            "__connect.errors.partition": str(raw.partition),
            "__connect.errors.offset": str(offset),
            "__connect.errors.connector.name": self._config.name,
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
