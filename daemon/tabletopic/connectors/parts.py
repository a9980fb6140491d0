"""The composition root of one connector: every part it runs, built once and in order, each handed what it needs.

Nothing below builds another part: the tables, the ledger of positions, the writer, the maintainer,
the table commits, the staging, the start positions, the sink task, the commit member and the
consumer are made here, and whoever made them (the connector's runtime) stops them.  The one late
binding left is the consumer's: it is built on the sink task, and hands it back what only a running consumer can do (its
group commit, its seeks, the bytes it holds; ``SinkTask.bind_consumer``).
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog

from tabletopic.buffer.partition_ledger import PartitionLedger
from tabletopic.commit.channel import Channel
from tabletopic.commit.member import Member
from tabletopic.commit.table_commits import TableCommits
from tabletopic.config.connector import ConnectorConfig
from tabletopic.config.worker import WorkerConfig, offset_reset
from tabletopic.consume.agent import FaustConsumer
from tabletopic.consume.faust_app import ConsumerSettings
from tabletopic.consume.group_offsets import committed_offsets
from tabletopic.kafka.clients import KafkaClients
from tabletopic.maintain.maintainer import Maintainer
from tabletopic.observe.metrics import SinkMetrics
from tabletopic.route.table_feeds import TableFeeds
from tabletopic.stage.failed_records import ErrorSettings, FailedRecords
from tabletopic.stage.staging import Staging, StagingSettings
from tabletopic.task.sink_task import SinkTask, TaskSettings
from tabletopic.task.start_positions import StartPositions, StartSettings, table_reader
from tabletopic.task.system_outages import SystemOutages
from tabletopic.write.column_conversion import ConversionRules
from tabletopic.write.file_writer import FileWriter
from tabletopic.write.iceberg_tables import IcebergTables, TablesSettings
from tabletopic.write.sink_writer import SinkWriter
from tabletopic.write.spark_session import SparkRuntime
from tabletopic.write.table_committer import TableCommitter
from tabletopic.write.table_shaper import TableShaper

log = structlog.get_logger(__name__)


@dataclass
class SinkParts:
    """What touches the tables: built in a thread, as opening a catalog calls into the JVM."""

    tables: IcebergTables
    task: SinkTask
    table_commits: TableCommits
    maintainer: Maintainer

    def close(self) -> None:
        self.task.shaper.close()
        self.task.writer.close()
        self.table_commits.close()
        self.maintainer.close()
        self.tables.close()


@dataclass
class ConnectorParts:
    sink: SinkParts
    member: Member
    consumer: FaustConsumer

    @property
    def task(self) -> SinkTask:
        return self.sink.task


def build_sink(config: ConnectorConfig, worker: WorkerConfig, clients: KafkaClients, spark: SparkRuntime,
               metrics: SinkMetrics) -> SinkParts:
    connector_log = log.bind(connector=config.name)
    tables = IcebergTables(spark, TablesSettings.of(config))
    read_table = table_reader(tables, config.group_id)
    ledger = PartitionLedger(lambda table: read_table(table).offsets)
    shaper = TableShaper(tables, ledger, config.name, config.case_insensitive, config.evolve_schema,
                         config.commit_threads, ConversionRules(strict=config.strict_values))
    writer = SinkWriter(tables, FileWriter(spark, config.write_props, metrics), metrics, config.buffer_flush_bytes,
                        ledger, config.write_parallelism)
    maintainer = Maintainer(config.name, config.group_id, tables, config.maintenance, metrics,
                            lambda: {*tables.known(), *(config.tables or [])},
                            enabled=lambda table: config.maintenance.enabled_for(config.table(table).keyed),
                            table_settings=config.maintenance_of)
    feeds = TableFeeds.of(config, offset_reset(worker, config.consumer_overrides))
    committer = TableCommitter(spark, config.name, config.group_id,
                               lambda table: metrics.commit_retries.labels(table=table).inc(),
                               maintainer.commit_positions.committing,
                               maintainer.commit_positions.snapshot_bound)
    table_commits = TableCommits(tables, committer, metrics, config.group_id, list(config.tables or []),
                                 config.offsets_refresh_rounds, config.commit_timeout_ms / 1000, config.commit_threads,
                                 feeds)
    outages = SystemOutages(config.catalog_max_failures, metrics, connector_log, config.retry_timeout_ms,
                            config.retry_delay_max_ms)
    start_settings = StartSettings(config.group_id, tuple(config.tables or ()), config.dynamic_enabled)
    starts = StartPositions(start_settings, tables, ledger, writer, read_table,
                            lambda tps: committed_offsets(clients, config.group_id, tps), outages, connector_log, feeds)
    staging = Staging(StagingSettings.of(config))
    task = SinkTask(TaskSettings.of(config), metrics, staging, ledger, shaper, writer, starts,
                    FailedRecords(ErrorSettings.of(config), metrics, clients), outages)
    return SinkParts(tables, task, table_commits, maintainer)


def build_parts(sink: SinkParts, config: ConnectorConfig, worker: WorkerConfig, clients: KafkaClients,
                metrics: SinkMetrics) -> ConnectorParts:
    """The protocol member and the consumer, on the sink: in the event loop's thread, which Faust needs."""
    channel = Channel(clients.for_control(config.control_kafka), config.control_topic, config.name,
                      on_skipped=metrics.control_messages_skipped.inc)
    member = Member(config.name, channel, sink.task, sink.table_commits, metrics, config.commit_interval_ms / 1000,
                    config.commit_timeout_ms / 1000, config.commit_stall_intervals, maintenance=sink.maintainer,
                    max_refusals=config.commit_max_refusals, max_conflicts=config.commit_max_conflicts)
    consumer = FaustConsumer(ConsumerSettings.of(config, worker), clients, sink.task, member)
    return ConnectorParts(sink, member, consumer)
