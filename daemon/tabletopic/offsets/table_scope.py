"""What one table's snapshot records: the offsets of the partitions that feed it, and round starts.

A table records the offsets of the partitions that feed it (:mod:`tabletopic.route.table_feeds`), so
where a partition resumes is decided by the tables fed by it. Where reading a partition anew does not
start at its earliest offset, the round start of a partition that no table records yet goes into
every table the round commits: a crash between two of the round's snapshots can leave the table owed
its rows without a record of it, and only another table's round start then says where those rows
began. Once a table records the partition, that entry is dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from tabletopic.core.topic_partition import TopicPartition

Offsets = Mapping[TopicPartition, int]


@dataclass(frozen=True)
class TableScope:
    feeds: Callable[[TopicPartition], bool]
    unrecorded: frozenset[TopicPartition]  # partitions no table records, as the coordinator knows them

    def offsets(self, offsets: Offsets) -> dict[TopicPartition, int]:
        return {tp: o for tp, o in offsets.items() if self.feeds(tp)}

    def round_start(self, starts: Offsets) -> dict[TopicPartition, int]:
        return {tp: o for tp, o in starts.items() if self.feeds(tp) or tp in self.unrecorded}


def unrecorded(partitions: Iterable[TopicPartition], recorded: Mapping[str, Offsets]) -> frozenset[TopicPartition]:
    """The partitions of ``partitions`` that no table of ``recorded`` records."""
    seen = {tp for offsets in recorded.values() for tp in offsets}
    return frozenset(tp for tp in partitions if tp not in seen)
