"""Source offsets in Iceberg snapshot summaries: the sink's only record of progress.

Every snapshot the sink commits carries, under one documented key, the next
offset to read for every topic-partition that fed it::

    kafka.connect.source-offsets.<consumer group> = {"orders": {"0": 1042, "1": 977}}

The key is scoped by consumer group (``connect-<name>`` by default) so two
connectors can write one table.  Snapshots without the key (compaction,
expiry, other writers) are walked past to the newest one that has it.
"""

from __future__ import annotations

import json
from typing import Any

TopicPartition = tuple[str, int]
OFFSETS_KEY_PREFIX = "kafka.connect.source-offsets."
COMMIT_ID_KEY = "kafka.connect.commit-id"
VTTS_KEY = "kafka.connect.vtts"  # valid-through timestamp: newest record timestamp committed, in ms
CONNECTOR_KEY = "tabletopic.connector"
EPOCH_KEY_PREFIX = "tabletopic.coordinator-epoch."  # the consumer group generation of the committing coordinator


def offsets_key(group_id: str) -> str:
    return OFFSETS_KEY_PREFIX + group_id


def encode(offsets: dict[TopicPartition, int]) -> str:
    by_topic: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        by_topic.setdefault(topic, {})[str(partition)] = offset
    return json.dumps(by_topic, separators=(",", ":"), sort_keys=True)


def decode(text: str) -> dict[TopicPartition, int]:
    doc = json.loads(text)
    return {(topic, int(p)): int(o) for topic, parts in doc.items() for p, o in parts.items()}


def epoch_key(group_id: str) -> str:
    return EPOCH_KEY_PREFIX + group_id


def read_offsets(table: Any, branch: str | None, group_id: str, max_walk: int = 10_000) -> dict[TopicPartition, int]:
    """The offsets in the newest snapshot of ``branch`` that carries them, or {} if none does."""
    summary = _newest_summary(table, branch, group_id, max_walk)
    return decode(summary.get(offsets_key(group_id))) if summary is not None else {}


def read_epoch(table: Any, branch: str | None, group_id: str, max_walk: int = 10_000) -> int:
    """The coordinator epoch that committed those offsets; -1 if none was recorded."""
    summary = _newest_summary(table, branch, group_id, max_walk)
    key = epoch_key(group_id)
    return int(summary.get(key)) if summary is not None and summary.containsKey(key) else -1


def _newest_summary(table: Any, branch: str | None, group_id: str, max_walk: int) -> Any:
    key = offsets_key(group_id)
    ref = table.refs().get(branch or "main")
    snapshot = table.snapshot(ref.snapshotId()) if ref is not None else None
    walked = 0
    while snapshot is not None and walked < max_walk:
        summary = snapshot.summary()
        if summary.containsKey(key):
            return summary
        parent = snapshot.parentId()
        snapshot = table.snapshot(parent) if parent is not None else None
        walked += 1
    return None
