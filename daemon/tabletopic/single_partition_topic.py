"""A single-partition Kafka topic that a daemon both writes and reads, in one order for every reader.

The control topic and the schemas topic are both of this kind: created on first
use, one producer, and one consumer assigned to partition 0 without a group.
"""

from __future__ import annotations

import asyncio
import contextlib

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import NewTopic
from aiokafka.errors import KafkaError, TopicAlreadyExistsError

from tabletopic.kafka_clients import KafkaClients

_STOP_TIMEOUT_S = 10.0


class SinglePartitionTopic:
    def __init__(self, clients: KafkaClients, topic: str, configs: dict[str, str] | None = None,
                 max_bytes: int | None = None) -> None:
        self.topic = topic
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
                await admin.create_topics([NewTopic(self.topic, 1, 1, topic_configs=self._configs)])
        finally:
            await admin.close()
        sizes = {} if self._max_bytes is None else {"fetch_max_bytes": self._max_bytes,
                                                    "max_partition_fetch_bytes": self._max_bytes}
        self._producer = self._clients.producer(acks="all", linger_ms=0,
                                                **({} if self._max_bytes is None else
                                                   {"max_request_size": self._max_bytes}))
        await self._producer.start()
        self._consumer = self._clients.consumer(enable_auto_commit=False, group_id=None,
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
