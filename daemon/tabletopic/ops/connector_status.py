"""``tabletopic status``: where a connector stands, from its tables and its consumer group.

Per partition: the offset the tables hold (the least any of them records), the group's committed
offset, the log end and the lag behind it; per table: when the offsets were last
committed and the newest record timestamp committed (freshness).  Tables are read
through pyiceberg, Kafka through the worker's client settings: no JVM, and nothing
changes.  Whether a daemon is running is for its ``/health`` to say.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from pyiceberg.exceptions import NoSuchTableError

from tabletopic.consume.group_offsets import committed_offsets
from tabletopic.core.topic_partition import TopicPartition
from tabletopic.kafka.clients import KafkaClients
from tabletopic.offsets.resume import lowest_recorded
from tabletopic.offsets.source_offsets import VTTS_KEY, Recorded
from tabletopic.ops.table_offsets import RecordingTables


@dataclass(frozen=True)
class TableStatus:
    name: str
    recorded: Recorded
    committed_at_ms: int | None
    newest_record_ms: int | None
    exists: bool = True


async def _kafka(clients: KafkaClients, group: str, positions: dict[TopicPartition, int]
                 ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
    """The group's committed offsets, and each partition's end as a fetch reports it (its high
    watermark): ListOffsets is not answered right by every broker."""
    from aiokafka import TopicPartition as KafkaTP
    wanted = [KafkaTP(t, p) for t, p in sorted(positions)]
    if not wanted:
        return {}, {}
    committed = await committed_offsets(clients, group, positions)
    consumer = clients.consumer(enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign(wanted)
        for tp in wanted:
            consumer.seek(tp, positions[(tp.topic, tp.partition)])
        ends: dict[TopicPartition, int] = {}
        for _ in range(10):
            await consumer.getmany(timeout_ms=500, max_records=1)
            ends = {(tp.topic, tp.partition): hw for tp in wanted
                    if (hw := consumer.highwater(tp)) is not None and hw >= 0}
            if len(ends) == len(wanted):
                break
        return committed, ends
    finally:
        await consumer.stop()


def table_statuses(scope: RecordingTables, tables: list[str]) -> list[TableStatus]:
    out = []
    for name in tables:
        try:
            table = scope.open(name)
        except (FileNotFoundError, NoSuchTableError):  # the sink makes it with its first records
            out.append(TableStatus(name, Recorded({}, -1, "none"), None, None, exists=False))
            continue
        recorded = scope.recorded(table, name)
        snapshot = table.metadata.snapshot_by_id(recorded.snapshot_id) if recorded.snapshot_id else None
        summary = snapshot.summary.additional_properties if snapshot is not None and snapshot.summary else {}
        out.append(TableStatus(name, recorded,
                               snapshot.timestamp_ms if snapshot is not None else None,
                               int(summary[VTTS_KEY]) if VTTS_KEY in summary else None))
    return out


def status_lines(scope: RecordingTables, clients: KafkaClients, tables: list[str]) -> list[str]:
    statuses = table_statuses(scope, tables)
    # Lag is counted from what the tables hold (the least offset any of them records for a partition), as
    # tabletopic_committed_lag_records counts it: what the sink would read again on a restart is another
    # figure (tabletopic offsets, GET /connectors/{c}/offsets).
    committed = lowest_recorded({s.name: s.recorded.offsets for s in statuses})
    group, ends = asyncio.run(_kafka(clients, scope.group_id, committed))
    now_ms = time.time() * 1000
    lines = [f"connector {scope.name}: group {scope.group_id}, {len(committed)} partitions in its tables"]
    for s in statuses:
        if not s.exists:
            lines.append(f"  table {s.name}: not created yet")
            continue
        when = f"committed {(now_ms - s.committed_at_ms) / 1000:.0f}s ago" if s.committed_at_ms else "no commit found"
        fresh = (f", newest record {(now_ms - s.newest_record_ms) / 1000:.0f}s old" if s.newest_record_ms else "")
        lines.append(f"  table {s.name}: offsets from the {s.recorded.source}, {when}{fresh}")
    total = 0
    for tp, offset in sorted(committed.items()):
        end = ends.get(tp)
        lag = end - offset if end is not None else None
        total += lag or 0
        lines.append(f"  {tp[0]}[{tp[1]}]: tables {offset}, group {group.get(tp, '-')}, "
                     f"end {end if end is not None else '-'}, lag {lag if lag is not None else '-'}")
    lines.append(f"  total lag: {total} records")
    return lines

