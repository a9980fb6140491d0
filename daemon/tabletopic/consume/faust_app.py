"""The Faust app that is a connector's consumer group member, set up from the worker's and the
connector's configuration.

Faust's own offset commits are switched off: the sink commits group offsets itself, after the tables
(see :mod:`tabletopic.consume.group_offsets`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tabletopic.config.connector import ConnectorConfig
from tabletopic.config.worker import WorkerConfig, offset_reset
from tabletopic.consume.batch_fetch import BatchingApp
from tabletopic.kafka.clients import KafkaClients

_NEVER = 10**9  # Faust commit settings that, with acks off, keep Faust from committing at all


@dataclass(frozen=True)
class ConsumerSettings:
    """The worker's and the connector's keys that the connector's consumer reads."""

    name: str  # the connector's name
    group_id: str  # connect-<name>, or consumer.override.group.id
    bootstrap_servers: tuple[str, ...]  # the worker's bootstrap.servers
    session_timeout_ms: int  # the worker's session.timeout.ms
    heartbeat_interval_ms: int  # the worker's heartbeat.interval.ms
    commit_timeout_ms: int  # iceberg.control.commit.timeout-ms: a rebalance waits for twice as long
    max_poll_records: int  # max.poll.records: consumer.override first, then the worker's
    auto_offset_reset: str  # auto.offset.reset: consumer.override first, then the worker's
    fetch_min_bytes: int
    fetch_max_wait_ms: int
    isolation_level: str
    topics: tuple[str, ...]  # topics
    topics_regex: re.Pattern[str] | None  # topics.regex
    # How often topics.regex is matched again: metadata.max.age.ms, else the commit interval (at most 5 min).
    topic_refresh_ms: int

    @classmethod
    def of(cls, config: ConnectorConfig, worker: WorkerConfig) -> ConsumerSettings:
        overrides = {**worker.consumer_props, **config.consumer_overrides}
        refresh_ms = int(overrides.get("metadata.max.age.ms", min(config.commit_interval_ms, 300_000)))
        return cls(config.name, config.group_id, tuple(worker.bootstrap_servers), worker.session_timeout_ms,
                   worker.heartbeat_interval_ms, config.commit_timeout_ms, config.max_poll_records,
                   offset_reset(worker, config.consumer_overrides), config.fetch_min_bytes, config.fetch_max_wait_ms,
                   config.isolation_level, tuple(config.topics or ()), config.topics_regex, refresh_ms)


def faust_app(settings: ConsumerSettings, clients: KafkaClients, datadir: str) -> BatchingApp:
    """The app of the connector's group; ``datadir`` is where Faust keeps what it makes at start."""
    return BatchingApp(
        settings.group_id,
        broker=[f"kafka://{server}" for server in settings.bootstrap_servers],
        broker_credentials=clients.faust_credentials(),
        web_enabled=False,
        store="memory://",
        datadir=datadir,
        autodiscover=False,
        topic_allow_declare=False,
        topic_disable_leader=True,
        broker_session_timeout=settings.session_timeout_ms / 1000,
        broker_heartbeat_interval=settings.heartbeat_interval_ms / 1000,
        # Kafka holds it in a 32-bit field of milliseconds: the Iceberg connector's tests set the commit
        # timeout to Integer.MAX_VALUE.
        broker_rebalance_timeout=min(2**31 - 1, max(60_000, 2 * settings.commit_timeout_ms)) / 1000,
        broker_commit_every=_NEVER,
        broker_commit_interval=float(_NEVER),
        broker_max_poll_records=settings.max_poll_records,
        consumer_auto_offset_reset=settings.auto_offset_reset,
        stream_wait_empty=False,
        stream_buffer_maxsize=max(4096, settings.max_poll_records * 2),
        loghandlers=[],
    )
