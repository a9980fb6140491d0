"""Taking over from the Iceberg Kafka Connect sink (the Java connector), with no gap and no duplicate.

The Java sink keeps its progress in two places, and tabletopic reads both:

* its workers commit source offsets to the Connect consumer group (``connect-<name>``),
  in the same Kafka transaction that sends their data files to the control topic;
* its coordinator marks each snapshot with ``kafka.connect.offsets.<control topic>.<group>``
  (the control topic's offsets, not the sources') and ``kafka.connect.commit-id``.

A table whose newest marked snapshot is the Java sink's has none of tabletopic's source
offsets, so the group's committed offsets are where reading goes on (see
``SinkTask.seek_positions``).  With no offsets in the group, reading would start per
``auto.offset.reset`` and write the table's records again: that is refused.
"""

from __future__ import annotations

from collections.abc import Iterable

from tabletopic.core.topic_partition import TopicPartition
from tabletopic.offsets.source_offsets import COMMIT_ID_KEY, OFFSETS_KEY_PREFIX, SnapshotView

JAVA_OFFSETS_PREFIX = "kafka.connect.offsets."


class TakeoverError(RuntimeError):
    """The Java sink wrote the table, and nothing says where it stopped reading."""


def java_sink_commit(view: SnapshotView, branch: str | None, max_walk: int = 1_000) -> str | None:
    """The Java sink's commit id if it made the newest marked snapshot of ``branch``, else None."""
    snapshot_id = view.head(branch)
    for _ in range(max_walk):
        if snapshot_id is None:
            return None
        summary = view.summary(snapshot_id)
        if summary is None:
            return None  # expired
        keys = list(summary)
        if any(k.startswith(OFFSETS_KEY_PREFIX) for k in keys):
            return None  # tabletopic committed since
        if any(k.startswith(JAVA_OFFSETS_PREFIX) for k in keys):
            return summary.get(COMMIT_ID_KEY) or "unknown"
        snapshot_id = view.parent(snapshot_id)
    return None


def check_takeover(commits: dict[str, str], group_id: str, assigned: Iterable[TopicPartition],
                   group: dict[TopicPartition, int]) -> None:
    """Refuse to go on when the Java sink wrote a table and the group holds no offsets to go on from."""
    if not commits or any(tp in group for tp in assigned):
        return
    tables = ", ".join(f"{t} (commit {c})" for t, c in sorted(commits.items()))
    raise TakeoverError(
        f"the Iceberg Kafka Connect sink last committed {tables}, but consumer group {group_id} holds no "
        "offsets for the assigned partitions: reading from auto.offset.reset would write its records again. "
        "Use the Java connector's name (its group is connect-<name>) or set iceberg.connect.group-id to its group.")
