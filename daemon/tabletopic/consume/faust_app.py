"""The Faust app that is a connector's consumer group member, set up from the worker's and the
connector's configuration.

Faust's own offset commits are switched off: the sink commits group offsets itself, after the tables
(see :mod:`tabletopic.consume.group_offsets`).
"""

from __future__ import annotations

from tabletopic.config.connector import ConnectorConfig
from tabletopic.config.worker import WorkerConfig, offset_reset
from tabletopic.consume.batch_fetch import BatchingApp
from tabletopic.kafka.clients import KafkaClients

_NEVER = 10**9  # Faust commit settings that, with acks off, keep Faust from committing at all


def faust_app(config: ConnectorConfig, worker: WorkerConfig, clients: KafkaClients, datadir: str) -> BatchingApp:
    """The app of ``config``'s group; ``datadir`` is where Faust keeps what it makes at start."""
    return BatchingApp(
        config.group_id,
        broker=[f"kafka://{server}" for server in worker.bootstrap_servers],
        broker_credentials=clients.faust_credentials(),
        web_enabled=False,
        store="memory://",
        datadir=datadir,
        autodiscover=False,
        topic_allow_declare=False,
        topic_disable_leader=True,
        broker_session_timeout=worker.session_timeout_ms / 1000,
        broker_heartbeat_interval=worker.heartbeat_interval_ms / 1000,
        # Kafka holds it in a 32-bit field of milliseconds: the Iceberg connector's tests set the commit
        # timeout to Integer.MAX_VALUE.
        broker_rebalance_timeout=min(2**31 - 1, max(60_000, 2 * config.commit_timeout_ms)) / 1000,
        broker_commit_every=_NEVER,
        broker_commit_interval=float(_NEVER),
        broker_max_poll_records=config.max_poll_records,
        consumer_auto_offset_reset=offset_reset(worker, config.consumer_overrides),
        stream_wait_empty=False,
        stream_buffer_maxsize=max(4096, config.max_poll_records * 2),
        loghandlers=[],
    )
