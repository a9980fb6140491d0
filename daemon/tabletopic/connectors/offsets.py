"""The offsets a connector's tables hold, read and changed as Kafka Connect's offsets API (KIP-875) asks.

A Connect sink's offsets are its consumer group's; tabletopic's live in its tables, one
record per table (see :mod:`tabletopic.offsets.source_offsets`), and the group's only
follow them.  Reading gives, per partition, the lowest offset any table records: where
the connector resumes it.

Changing them needs the connector stopped and its consumer group empty, as in Connect.
Each table then gets an offsets-only snapshot recording the new offsets (carrying its
coordinator epoch over), and the group's offsets are replaced by the tables' resume
positions, so that a restart, lag tools and the tables all agree.  Both steps are
idempotent: a change that failed half-way is made whole by asking again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping

from aiokafka import TopicPartition as KafkaTP
from aiokafka.errors import KafkaError
from aiokafka.protocol.admin import DeleteGroupsRequest

from tabletopic.config.connector import ConnectorConfig
from tabletopic.consume.faust_aiokafka import admin_request
from tabletopic.core.topic_partition import TopicPartition
from tabletopic.kafka.clients import KafkaClients
from tabletopic.offsets.resume import resume_positions
from tabletopic.offsets.source_offsets import Recorded
from tabletopic.task.start_positions import table_reader
from tabletopic.write.iceberg_tables import IcebergTables, TablesSettings
from tabletopic.write.spark_session import SparkRuntime
from tabletopic.write.table_committer import TableCommitter

# A partition to an offset, or to None: forget it (it starts where auto.offset.reset says).
OffsetChanges = Mapping[TopicPartition, int | None]


class OffsetsChangeRefused(RuntimeError):
    """The change cannot be made now; the message says why (a member still in the group, say)."""


class TableOffsets:
    """One connector's tables, for reading and changing the offsets they record (JVM calls: use a thread)."""

    def __init__(self, spark: SparkRuntime, config: ConnectorConfig) -> None:
        self.config = config
        self._tables = IcebergTables(spark, TablesSettings.of(config))
        self._committer = TableCommitter(spark, config.name, config.group_id)

    def close(self) -> None:
        self._tables.close()

    def tables(self) -> list[str]:
        """The static tables that exist, and for dynamic routing every table that records this group."""
        names = {n for n in self.config.tables or [] if self._tables.exists(n)}
        if self.config.dynamic_enabled:
            names |= self._tables.tables_recording(self.config.group_id)
        return sorted(names)

    def read(self) -> dict[str, Recorded]:
        read = table_reader(self._tables, self.config.group_id)
        return {name: read(name) for name in self.tables()}

    def change(self, changes: OffsetChanges | None) -> dict[TopicPartition, int]:
        """Record ``changes`` in every table (None: forget every partition); the new resume positions."""
        held = {}
        for name, recorded in self.read().items():
            new = {} if changes is None else dict(recorded.offsets)
            for tp, offset in (changes or {}).items():
                if offset is None:
                    new.pop(tp, None)
                else:
                    new[tp] = offset
            if new != recorded.offsets or recorded.source != "snapshot":
                self._committer.set_offsets(self._tables.get(name), new)
            held[name] = new
        positions = resume_positions(held)  # an operator's offsets carry no round start
        if not held and changes:  # no table yet: the group alone says where to start
            positions = {tp: o for tp, o in changes.items() if o is not None}
        return positions


async def group_members(clients: KafkaClients, group: str) -> int:
    """How many members the consumer group has now."""
    admin = clients.admin()
    await admin.start()
    try:
        described = await admin.describe_consumer_groups([group])
    finally:
        await admin.close()
    return sum(len(g[5]) for response in described for g in response.groups)


async def replace_group_offsets(clients: KafkaClients, group: str, positions: Mapping[TopicPartition, int]) -> None:
    """The empty group's offsets become ``positions`` and nothing else: the group is deleted, then committed to."""
    admin = clients.admin()
    await admin.start()
    try:
        node = await admin.find_coordinator(group)
        response = await admin_request(admin, DeleteGroupsRequest([group]), node)
        for name, code in response.results:
            # 69: GROUP_ID_NOT_FOUND, nothing to delete. 68: NON_EMPTY_GROUP, a member joined meanwhile.
            if code == 68:
                raise OffsetsChangeRefused(f"consumer group {name} has members again; stop them and try again")
            if code not in (0, 69):
                raise OffsetsChangeRefused(f"the broker did not delete consumer group {name} (error {code})")
    finally:
        with contextlib.suppress(KafkaError):
            await admin.close()
    if not positions:
        return
    consumer = clients.consumer(group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        tps = {KafkaTP(t, p): o for (t, p), o in positions.items()}
        consumer.assign(list(tps))
        await consumer.commit(tps)
    finally:
        await consumer.stop()


async def change_offsets(spark: SparkRuntime, clients: KafkaClients, config: ConnectorConfig,
                         changes: OffsetChanges | None) -> dict[TopicPartition, int]:
    """Alter (None: reset) a stopped connector's offsets in its tables, then in its group; the new positions.

    The REST API (with its own check that the connector is STOPPED) and ``tabletopic offsets --set``
    both come here.
    """
    members = await group_members(clients, config.group_id)
    if members:
        raise OffsetsChangeRefused(f"consumer group {config.group_id} still has {members} active member(s): a "
                                   "worker still runs this connector; stop it there first")
    tables = await asyncio.to_thread(TableOffsets, spark, config)
    try:
        positions = await asyncio.to_thread(tables.change, changes)
    finally:
        tables.close()
    await replace_group_offsets(clients, config.group_id, positions)
    return positions


def change_offsets_locally(spark_conf: Mapping[str, str], clients: KafkaClients, config: ConnectorConfig,
                           changes: OffsetChanges | None) -> dict[TopicPartition, int]:
    """``tabletopic offsets --set/--reset`` without ``--url``: the same change, in a JVM of this process's own."""
    spark = SparkRuntime(spark_conf, lake=config.catalog.needs_lake_jars, extra_jars=config.catalog.driver_jars)
    try:
        return asyncio.run(change_offsets(spark, clients, config, changes))
    finally:
        spark.stop()
