"""The JVM's Iceberg table as a :class:`~tabletopic.offsets.source_offsets.SnapshotView`, and the reads
of recorded offsets made through it.

``offsets/`` says what a table records and how to find it (the walk, the property that answers after
someone's expiry); this module is the only place where that walk turns into py4j calls.

Thread affinity: any thread but the event loop's; every method here is a py4j round trip.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from tabletopic.core.topic_partition import TopicPartition
from tabletopic.offsets.source_offsets import Recorded, offsets_key, recorded_in


class JavaSnapshots:
    """A :class:`SnapshotView` over ``org.apache.iceberg.Table``: one py4j call per read."""

    def __init__(self, table: Any) -> None:
        self._table = table

    def head(self, branch: str | None) -> int | None:
        ref = self._table.refs().get(branch or "main")
        return int(ref.snapshotId()) if ref is not None else None

    def summary(self, snapshot_id: int) -> Mapping[str, str] | None:
        snapshot = self._table.snapshot(snapshot_id)
        return _JavaMap(snapshot.summary()) if snapshot is not None else None

    def parent(self, snapshot_id: int) -> int | None:
        parent = self._table.snapshot(snapshot_id).parentId()
        return int(parent) if parent is not None else None

    def property(self, key: str) -> str | None:
        return self._table.properties().get(key)


class _HelpedSnapshots(JavaSnapshots):
    """The JVM's Table, its head and summaries read through tabletopic's ``TableHeads``: one py4j
    call each, where Iceberg's own API takes one per summary key (a commit's hot path reads them)."""

    def __init__(self, table: Any, helper: Any, head: tuple[int, Mapping[str, str] | None]) -> None:
        super().__init__(table)
        self._helper = helper  # tabletopic.TableHeads' class, as py4j sees it
        self._head = head  # (id, summary) of the branch's head (-1: none), read with the refresh that preceded

    def head(self, branch: str | None) -> int | None:
        return self._head[0] if self._head[0] >= 0 else None

    def summary(self, snapshot_id: int) -> Mapping[str, str] | None:
        if snapshot_id == self._head[0]:
            return self._head[1]
        text = self._helper.summaryJson(self._table, snapshot_id)
        return json.loads(text) if text is not None else None


class _JavaMap(Mapping[str, str]):
    """A Java Map read key by key: one py4j call per lookup, none to copy it."""

    def __init__(self, java: Any) -> None:
        self._java = java

    def __getitem__(self, key: str) -> str:
        if not self._java.containsKey(key):
            raise KeyError(key)
        return str(self._java.get(key))

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._java.keySet()))

    def __len__(self) -> int:
        return int(self._java.size())


def read_recorded(table: Any, branch: str | None, group_id: str, max_walk: int = 10_000) -> Recorded:
    """What the JVM's ``table`` records for ``group_id`` on ``branch`` (see :func:`recorded_in`)."""
    return recorded_in(JavaSnapshots(table), branch, group_id, max_walk)


def read_refreshed(table: Any, branch: str | None, group_id: str, helper: Any) -> tuple[int, Recorded]:
    """Refresh the JVM's ``table`` and read what it records, as :func:`read_recorded`: the head snapshot's
    id (-1: none) and what the table records. The refresh, the head and its summary take one py4j call
    (``helper``, tabletopic's ``TableHeads`` class), where they took three, and each older snapshot one,
    for every table a round reads."""
    head = json.loads(helper.refreshedHeadJson(table, branch))
    head_id = int(head["id"])
    return head_id, recorded_in(_HelpedSnapshots(table, helper, (head_id, head["summary"])), branch, group_id)


def read_offsets(table: Any, branch: str | None, group_id: str, max_walk: int = 10_000) -> dict[TopicPartition, int]:
    """The offsets ``group_id`` committed to ``branch``, or {} if none (see :func:`read_recorded`)."""
    return read_recorded(table, branch, group_id, max_walk).offsets


def tables_recording(catalog: Any, root: Any, group_id: str) -> set[str]:
    """Every table of the Java ``catalog`` (walked from the ``root`` namespace) that records
    ``group_id``'s offsets: what a dynamically routed connector may have written."""
    found: set[str] = set()
    key = offsets_key(group_id)
    stack = [root]
    while stack:
        namespace = stack.pop()
        stack.extend(catalog.listNamespaces(namespace))
        if namespace.isEmpty():
            continue
        for ident in catalog.listTables(namespace):
            table = catalog.loadTable(ident)
            snapshot = table.currentSnapshot()
            if snapshot is not None and (snapshot.summary().containsKey(key) or read_offsets(table, None, group_id)):
                found.add(ident.toString())
    return found

