"""Reading a table's offsets: the newest snapshot that carries them, or the table property when someone
else's expiry removed every such snapshot."""

from __future__ import annotations

import json
from typing import Any

from tabletopic.offsets.source_offsets import (
    encode,
    epoch_key,
    java_instant,
    offsets_key,
    property_key,
    property_value,
    round_start_key,
)
from tabletopic.write.java_snapshots import read_recorded, read_refreshed

GROUP = "connect-a"


class _Map(dict):  # the Java Map calls the code makes
    def containsKey(self, key: str) -> bool:
        return key in self

    def get(self, key: str, default: Any = None) -> Any:
        return super().get(key, default)


class _Snapshot:
    def __init__(self, snapshot_id: int, parent: int | None, summary: dict[str, str]) -> None:
        self.id, self.parent, self._summary = snapshot_id, parent, _Map(summary)

    def summary(self) -> _Map:
        return self._summary

    def parentId(self) -> int | None:
        return self.parent


class _Ref:
    def __init__(self, snapshot_id: int) -> None:
        self.id = snapshot_id

    def snapshotId(self) -> int:
        return self.id


class _Table:
    def __init__(self, snapshots: list[_Snapshot], head: int | None, props: dict[str, str]) -> None:
        self._snapshots = {s.id: s for s in snapshots}
        self._refs = _Map({"main": _Ref(head)} if head is not None else {})
        self._props = _Map(props)

    def refs(self) -> _Map:
        return self._refs

    def snapshot(self, snapshot_id: int) -> _Snapshot | None:
        return self._snapshots.get(snapshot_id)

    def properties(self) -> _Map:
        return self._props


def _ours(offset: int, epoch: int) -> dict[str, str]:
    return {offsets_key(GROUP): encode({("t", 0): offset}), epoch_key(GROUP): str(epoch)}


PROPS = {property_key(GROUP, None): property_value({("t", 0): 30}, 4)}


def test_the_newest_snapshot_with_offsets_answers_past_a_compaction() -> None:
    table = _Table([_Snapshot(1, None, _ours(10, 2)), _Snapshot(2, 1, _ours(20, 3)), _Snapshot(3, 2, {})], 3, PROPS)
    recorded = read_recorded(table, None, GROUP)
    assert (recorded.offsets, recorded.epoch, recorded.source) == ({("t", 0): 20}, 3, "snapshot")


def test_the_property_answers_once_the_snapshots_with_offsets_were_expired() -> None:
    # Only the compaction is left; its parent (which carried the offsets) is gone.
    table = _Table([_Snapshot(3, 2, {})], 3, PROPS)
    recorded = read_recorded(table, None, GROUP)
    assert (recorded.offsets, recorded.epoch, recorded.source) == ({("t", 0): 30}, 4, "property")


def test_a_history_that_starts_without_offsets_records_none_whatever_the_property() -> None:
    # A rollback to before this sink's first commit: the property must not resurrect offsets.
    table = _Table([_Snapshot(1, None, {})], 1, PROPS)
    assert read_recorded(table, None, GROUP).source == "none"
    assert read_recorded(_Table([], None, PROPS), None, GROUP).offsets == {}


def test_the_property_is_per_branch() -> None:
    assert property_key(GROUP, None) != property_key(GROUP, "audit")


def test_where_the_round_began_is_read_from_the_snapshot_that_carries_the_offsets() -> None:
    started = {round_start_key(GROUP): encode({("t", 0): 15})}
    table = _Table([_Snapshot(1, None, {**_ours(20, 3), **started}), _Snapshot(2, 1, {})], 2, PROPS)
    assert read_recorded(table, None, GROUP).round_start == {("t", 0): 15}
    # An operator's offsets (and snapshots older than the key) say nothing of a round.
    table = _Table([_Snapshot(1, None, {**_ours(20, 3), **started}), _Snapshot(2, 1, _ours(5, -1))], 2, PROPS)
    assert read_recorded(table, None, GROUP).round_start == {}


def test_the_property_mirrors_where_the_round_began() -> None:
    props = {property_key(GROUP, None): property_value({("t", 0): 30}, 4, {("t", 0): 25})}
    recorded = read_recorded(_Table([_Snapshot(3, 2, {})], 3, props), None, GROUP)
    assert (recorded.source, recorded.offsets, recorded.round_start) == ("property", {("t", 0): 30}, {("t", 0): 25})
    assert read_recorded(_Table([_Snapshot(3, 2, {})], 3, PROPS), None, GROUP).round_start == {}


class _Helper:
    """tabletopic's TableHeads over a fake table, counting the calls a commit would make."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def headSnapshotId(self, table: _Table, branch: str | None) -> int:
        self.calls.append("head")
        ref = table.refs().get(branch or "main")
        return ref.snapshotId() if ref is not None else -1

    def refreshedHeadJson(self, table: _Table, branch: str | None) -> str:
        self.calls.append("refreshed head")
        head = self.headSnapshotId(table, branch)
        self.calls.pop()
        snapshot = table.snapshot(head)
        return json.dumps({"id": head, "summary": dict(snapshot.summary()) if snapshot is not None else None})

    def summaryJson(self, table: _Table, snapshot_id: int) -> str | None:
        self.calls.append(f"summary {snapshot_id}")
        snapshot = table.snapshot(snapshot_id)
        return json.dumps(dict(snapshot.summary())) if snapshot is not None else None


def test_a_head_read_with_the_refresh_is_not_asked_again_and_the_walk_goes_on_past_it() -> None:
    older = [_Snapshot(1, None, _ours(10, 2)), _Snapshot(2, 1, _ours(20, 3))]
    table = _Table([*older, _Snapshot(3, 2, {})], 3, PROPS)
    helper = _Helper()
    head, recorded = read_refreshed(_Table(older, 2, PROPS), None, GROUP, helper)
    assert (head, recorded.offsets, helper.calls) == (2, {("t", 0): 20}, ["refreshed head"])
    assert read_refreshed(_Table([], None, PROPS), None, GROUP, _Helper())[1].source == "none"

    helper = _Helper()
    head, recorded = read_refreshed(table, None, GROUP, helper)
    assert (head, recorded.offsets, recorded.snapshot_id) == (3, {("t", 0): 20}, 2)
    # The head's summary came with the refresh; its parent's did not.
    assert helper.calls == ["refreshed head", "summary 2"]


def test_the_valid_through_time_is_written_as_javas_offset_date_time() -> None:
    """OffsetDateTime.toString(): seconds only when not zero, milliseconds when there are any, Z for UTC."""
    assert java_instant(1684408953000) == "2023-05-18T11:22:33Z"
    assert java_instant(1684408953123) == "2023-05-18T11:22:33.123Z"
    assert java_instant(1684408920000) == "2023-05-18T11:22Z"
    assert java_instant(0) == "1970-01-01T00:00Z"
