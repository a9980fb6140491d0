"""What workers and the coordinator tell each other at a commit barrier.

The shapes follow the Iceberg sink connector's control events: the
coordinator starts a commit, each worker answers with the files it wrote per
table and with the offsets its answer covers, and the coordinator reports the
snapshots it made.  In one daemon they pass in-process.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class StartCommit:
    commit_id: str
    reason: str  # interval, revoke, shutdown, pressure


@dataclass
class DataWritten:
    """Files one worker wrote for one table since its last answer."""

    commit_id: str
    table: str
    files: Any  # java.util.List<ContentFile>
    records: int
    file_count: int
    max_timestamp_ms: int | None
    # The table offsets the rows were cut against (rows below them were dropped); None when the
    # files were cut against different ones, which no coordinator may accept.
    floors: dict[TopicPartition, int] | None = None


@dataclass
class DataComplete:
    """The worker's positions: every record below them is in a DataWritten of this or an earlier commit."""

    commit_id: str
    positions: dict[TopicPartition, int]
    written: list[DataWritten] = field(default_factory=list)
    # Per partition, the first offset the files may hold (taken with the positions, in one step).
    starts: dict[TopicPartition, int] = field(default_factory=dict)
    # Per table, the offsets rows were cut against, also for tables that got no rows: records cut
    # away entirely still count as covered, and only these floors say the cut was right.
    floors: dict[str, dict[TopicPartition, int]] = field(default_factory=dict)


@dataclass
class CommitComplete:
    commit_id: str
    snapshots: dict[str, int]  # table -> snapshot id
    failed: dict[str, str]  # table -> why
    fenced: bool = False
