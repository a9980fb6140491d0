"""Source offsets in Iceberg snapshot summaries: the sink's only record of progress.

Every snapshot the sink commits carries, under one documented key, the next
offset to read for every topic-partition that fed it::

    kafka.connect.source-offsets.<consumer group> = {"orders": {"0": 1042, "1": 977}}

The key is scoped by consumer group (``connect-<name>`` by default) so two
connectors can write one table.  Snapshots without the key (compaction,
other writers) are walked past to the newest one that has it.  The same commit
mirrors the offsets into a table property, which answers when someone else's
snapshot expiry removed every snapshot that carried them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

TopicPartition = tuple[str, int]
OFFSETS_KEY_PREFIX = "kafka.connect.source-offsets."
COMMIT_ID_KEY = "kafka.connect.commit-id"
VTTS_KEY = "kafka.connect.vtts"  # valid-through timestamp: newest record timestamp committed, in ms
CONNECTOR_KEY = "tabletopic.connector"
EPOCH_KEY_PREFIX = "tabletopic.coordinator-epoch."  # the consumer group generation of the committing coordinator
# A table property, set in the same metadata commit as each snapshot: survives any snapshot expiry.
PROPERTY_KEY_PREFIX = "tabletopic.offsets."


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


def property_key(group_id: str, branch: str | None) -> str:
    """The table property mirroring the offsets of ``group_id`` on ``branch``."""
    return PROPERTY_KEY_PREFIX + group_id + (f"@{branch}" if branch else "")


def property_value(offsets: dict[TopicPartition, int], epoch: int) -> str:
    return json.dumps({"offsets": json.loads(encode(offsets)), "epoch": epoch}, separators=(",", ":"))


@dataclass(frozen=True)
class Recorded:
    """What a table records for one consumer group, and where it was found."""

    offsets: dict[TopicPartition, int]
    epoch: int  # the committing coordinator's epoch; -1 if none was recorded
    source: str  # "snapshot", "property" (its snapshots were expired by someone else) or "none"


def read_recorded(table: Any, branch: str | None, group_id: str, max_walk: int = 10_000) -> Recorded:
    """The offsets in the newest snapshot of ``branch`` that carries them.

    If the walk reaches a parent that no longer exists (someone expired the snapshots that carried
    them, a compaction's being newer) the table property written in the same commit answers instead.
    A history that simply starts without them (a rollback to before this sink) records nothing.
    """
    key = offsets_key(group_id)
    ref = table.refs().get(branch or "main")
    snapshot = table.snapshot(ref.snapshotId()) if ref is not None else None
    walked = 0
    while snapshot is not None and walked < max_walk:
        summary = snapshot.summary()
        if summary.containsKey(key):
            ekey = epoch_key(group_id)
            return Recorded(decode(summary.get(key)), int(summary.get(ekey)) if summary.containsKey(ekey) else -1,
                            "snapshot")
        parent = snapshot.parentId()
        if parent is None:
            return Recorded({}, -1, "none")
        snapshot = table.snapshot(parent)
        walked += 1
    text = table.properties().get(property_key(group_id, branch)) if ref is not None else None
    if text is None:
        return Recorded({}, -1, "none")
    doc = json.loads(text)
    return Recorded({(t, int(p)): int(o) for t, parts in doc["offsets"].items() for p, o in parts.items()},
                    int(doc.get("epoch", -1)), "property")


def read_offsets(table: Any, branch: str | None, group_id: str, max_walk: int = 10_000) -> dict[TopicPartition, int]:
    """The offsets ``group_id`` committed to ``branch``, or {} if none (see :func:`read_recorded`)."""
    return read_recorded(table, branch, group_id, max_walk).offsets


def read_epoch(table: Any, branch: str | None, group_id: str, max_walk: int = 10_000) -> int:
    """The coordinator epoch that committed those offsets; -1 if none was recorded."""
    return read_recorded(table, branch, group_id, max_walk).epoch
