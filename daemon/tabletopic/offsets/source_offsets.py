"""Source offsets in Iceberg snapshot summaries: the sink's only record of progress.

Every snapshot the sink commits carries, under one documented key, the next
offset to read for every topic-partition that fed it::

    kafka.connect.source-offsets.<consumer group> = {"orders": {"0": 1042, "1": 977}}

The key is scoped by consumer group (``connect-<name>`` by default) so two
connectors can write one table.  Snapshots without the key (compaction,
other writers) are walked past to the newest one that has it.  The same commit
mirrors the offsets into a table property, which answers when someone else's
snapshot expiry removed every snapshot that carried them.

Beside the offsets, each of the sink's snapshots records where the round it
committed began reading each partition (``tabletopic.round-start.<group>``).  A
round commits its tables one snapshot each, so a crash between two of them leaves
a table that holds none of a partition's rows, records no offset for it, and is
still owed the round's rows: only the other tables' round starts say where those
rows began.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Protocol

from tabletopic.core.topic_partition import TopicPartition

OFFSETS_KEY_PREFIX = "kafka.connect.source-offsets."
COMMIT_ID_KEY = "kafka.connect.commit-id"
VTTS_KEY = "kafka.connect.vtts"  # valid-through timestamp: newest record timestamp committed, in ms
# The Apache Iceberg sink's own keys, which its tools and tests read: the oldest of each partition's newest
# committed timestamp, as Java prints an OffsetDateTime, and the committing task.
VALID_THROUGH_KEY = "kafka.connect.valid-through-ts"
TASK_ID_KEY = "kafka.connect.task-id"
CONNECTOR_KEY = "tabletopic.connector"
EPOCH_KEY_PREFIX = "tabletopic.coordinator-epoch."  # the consumer group generation of the committing coordinator
ROUND_START_KEY_PREFIX = "tabletopic.round-start."  # per partition, where the committed round began reading
# A table property, set in the same metadata commit as each snapshot: survives any snapshot expiry.
PROPERTY_KEY_PREFIX = "tabletopic.offsets."


def java_instant(millis: int) -> str:
    """``OffsetDateTime.toString()`` at UTC: seconds only when not zero, a fraction in milliseconds, ``Z``."""
    moment = datetime.fromtimestamp(millis / 1000, tz=timezone.utc)
    text = moment.strftime("%Y-%m-%dT%H:%M")
    fraction = millis % 1000
    if moment.second or fraction:
        text += f":{moment.second:02d}"
    if fraction:
        text += f".{fraction:03d}"
    return text + "Z"


def offsets_key(group_id: str) -> str:
    return OFFSETS_KEY_PREFIX + group_id


def encode(offsets: dict[TopicPartition, int]) -> str:
    by_topic: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        by_topic.setdefault(topic, {})[str(partition)] = offset
    return json.dumps(by_topic, separators=(",", ":"), sort_keys=True)


def _from_doc(doc: Mapping[str, Mapping[str, int]]) -> dict[TopicPartition, int]:
    return {(topic, int(p)): int(o) for topic, parts in doc.items() for p, o in parts.items()}


def decode(text: str) -> dict[TopicPartition, int]:
    return _from_doc(json.loads(text))


def epoch_key(group_id: str) -> str:
    return EPOCH_KEY_PREFIX + group_id


def round_start_key(group_id: str) -> str:
    return ROUND_START_KEY_PREFIX + group_id


def property_key(group_id: str, branch: str | None) -> str:
    """The table property mirroring the offsets of ``group_id`` on ``branch``."""
    return PROPERTY_KEY_PREFIX + group_id + (f"@{branch}" if branch else "")


def property_value(offsets: dict[TopicPartition, int], epoch: int,
                   round_start: dict[TopicPartition, int] | None = None) -> str:
    doc: dict[str, Any] = {"offsets": json.loads(encode(offsets)), "epoch": epoch}
    if round_start:
        doc["round_start"] = json.loads(encode(round_start))
    return json.dumps(doc, separators=(",", ":"))


@dataclass(frozen=True)
class Recorded:
    """What a table records for one consumer group, and where it was found."""

    offsets: dict[TopicPartition, int]
    epoch: int  # the committing coordinator's epoch; -1 if none was recorded
    source: str  # "snapshot", "property" (its snapshots were expired by someone else) or "none"
    snapshot_id: int | None = None  # the snapshot that carries them, when found in one
    # Per partition, where the last round this table committed began reading: none for an operator's
    # offsets, nor for snapshots written before the key existed.
    round_start: dict[TopicPartition, int] = field(default_factory=dict)


class SnapshotView(Protocol):
    """The little of a table that finding offsets needs, over the JVM's Table or pyiceberg's."""

    def head(self, branch: str | None) -> int | None: ...

    def summary(self, snapshot_id: int) -> Mapping[str, str] | None: ...  # None: no such snapshot (expired)

    def parent(self, snapshot_id: int) -> int | None: ...

    def property(self, key: str) -> str | None: ...


class PyIcebergTable:
    """The same view over a pyiceberg table (``tabletopic offsets``, no JVM)."""

    def __init__(self, table: Any) -> None:
        self._metadata = table.metadata

    def head(self, branch: str | None) -> int | None:
        ref = self._metadata.refs.get(branch or "main")
        return ref.snapshot_id if ref is not None else None

    def summary(self, snapshot_id: int) -> Mapping[str, str] | None:
        snapshot = self._metadata.snapshot_by_id(snapshot_id)
        if snapshot is None:
            return None
        return snapshot.summary.additional_properties if snapshot.summary is not None else {}

    def parent(self, snapshot_id: int) -> int | None:
        snapshot = self._metadata.snapshot_by_id(snapshot_id)
        return snapshot.parent_snapshot_id if snapshot is not None else None

    def property(self, key: str) -> str | None:
        return self._metadata.properties.get(key)


def recorded_in(view: SnapshotView, branch: str | None, group_id: str, max_walk: int = 10_000) -> Recorded:
    """The offsets in the newest snapshot of ``branch`` that carries them.

    If the walk reaches a parent that no longer exists (someone expired the snapshots that carried
    them, a compaction's being newer) the table property written in the same commit answers instead.
    A history that simply starts without them (a rollback to before this sink) records nothing.
    """
    key, ekey, rkey = offsets_key(group_id), epoch_key(group_id), round_start_key(group_id)
    head = view.head(branch)
    snapshot_id = head
    walked = 0
    while snapshot_id is not None and walked < max_walk:
        summary = view.summary(snapshot_id)
        if summary is None:
            break  # expired: the property answers
        if key in summary:
            return Recorded(decode(summary[key]), int(summary[ekey]) if ekey in summary else -1, "snapshot",
                            snapshot_id, decode(summary[rkey]) if rkey in summary else {})
        parent = view.parent(snapshot_id)
        if parent is None:
            return Recorded({}, -1, "none")
        snapshot_id = parent
        walked += 1
    text = view.property(property_key(group_id, branch)) if head is not None else None
    if text is None:
        return Recorded({}, -1, "none")
    doc = json.loads(text)
    return Recorded(_from_doc(doc["offsets"]), int(doc.get("epoch", -1)), "property",
                    round_start=_from_doc(doc.get("round_start", {})))
