"""The schemas topic: one compacted, single-partition Kafka topic holding every registry change.

A single partition gives every reader the same order, which is what lets
racing writers be resolved the same way everywhere (see ``schema_store``).
The topic is read by a :class:`~tabletopic.kafka.single_partition_topic.TopicLog`:
writers append, then wait until its reader has applied their record, so a
reply is only sent once the change is in this daemon's state.
"""

from __future__ import annotations

import json

import structlog

from tabletopic.kafka.clients import KafkaClients
from tabletopic.kafka.single_partition_topic import TopicLog
from tabletopic.registry.schema_records import Write
from tabletopic.registry.schema_store import SchemaStore

log = structlog.get_logger(__name__)


class SchemaLog:
    def __init__(self, clients: KafkaClients, topic: str, store: SchemaStore) -> None:
        self.topic = topic
        self.store = store
        self._log = TopicLog(clients, topic, self._apply)

    async def start(self, timeout_s: float = 30.0) -> None:
        await self._log.start(timeout_s)
        log.info("schemas loaded", topic=self.topic, subjects=len(self.store.subjects),
                 schemas=len(self.store.schemas))

    async def stop(self) -> None:
        await self._log.stop()

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

    async def catch_up(self, timeout_s: float = 10.0) -> None:
        """Wait until everything in the topic now has been applied (other daemons' writes too)."""
        await self._log.catch_up(timeout_s)

    async def append(self, writes: list[Write], timeout_s: float = 10.0) -> None:
        await self._log.append([(json.dumps(w.key, sort_keys=True).encode(),
                                 None if w.value is None else json.dumps(w.value).encode()) for w in writes],
                               timeout_s)
