"""What a sink wrote: the files one answer adds to a table, and one write's result as a whole."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tabletopic.core.topic_partition import TopicPartition


@dataclass
class TableFiles:
    """What one answer (or several, merged) adds to one table."""

    files: list[dict[str, Any]]  # Iceberg content files, in ContentFileParser's JSON form
    records: int
    max_timestamp_ms: int | None
    written_at_ms: int | None = None  # wall clock when the oldest of the files was written
    valid_through_ms: int | None = None  # see buffer.table_buffer.Drained; the oldest of the merged

    def merged(self, other: TableFiles) -> TableFiles:
        stamps = [t for t in (self.max_timestamp_ms, other.max_timestamp_ms) if t is not None]
        written = [t for t in (self.written_at_ms, other.written_at_ms) if t is not None]
        through = [t for t in (self.valid_through_ms, other.valid_through_ms) if t is not None]
        return TableFiles(self.files + other.files, self.records + other.records, max(stamps) if stamps else None,
                          min(written) if written else None, min(through) if through else None)


@dataclass
class WriteResult:
    """What a sink wrote for one answer; taken in one step, so no range claims a row that is in no file."""

    positions: dict[TopicPartition, int]  # next offset per partition
    starts: dict[TopicPartition, int]  # first uncommitted offset per partition
    cut_at: dict[str, dict[TopicPartition, int]]  # per buffered table, the floors its rows were cut against
    written: dict[str, TableFiles]
    written_floors: dict[str, dict[TopicPartition, int] | None]  # None: files cut against differing floors
