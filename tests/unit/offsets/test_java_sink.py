"""Finding the Iceberg Kafka Connect sink's last commit in a table's history, and refusing a takeover
that would write its records again."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from tabletopic.offsets.java_sink import TakeoverError, check_takeover, java_sink_commit
from tabletopic.offsets.source_offsets import COMMIT_ID_KEY, offsets_key

# What the Java sink's coordinator writes on each snapshot: its control topic's offsets and a commit id.
JAVA = {"kafka.connect.offsets.control-iceberg.cg-control-orders": "{}", COMMIT_ID_KEY: "6c1f"}
OURS = {offsets_key("connect-orders"): '{"orders":{"0":5}}'}
COMPACTION: dict[str, str] = {"added-data-files": "1"}


class _History:
    """A :class:`SnapshotView` over a chain of summaries, oldest first; ``expired`` snapshots are gone."""

    def __init__(self, *summaries: Mapping[str, str], expired: int = 0) -> None:
        self._summaries = {n: s for n, s in enumerate(summaries, 1) if n > expired}
        self._head = len(summaries) or None

    def head(self, branch: str | None) -> int | None:
        return self._head if branch in (None, "main") else None

    def summary(self, snapshot_id: int) -> Mapping[str, str] | None:
        return self._summaries.get(snapshot_id)

    def parent(self, snapshot_id: int) -> int | None:
        return snapshot_id - 1 or None

    def property(self, key: str) -> str | None:
        return None


@pytest.mark.parametrize(("history", "branch", "commit"), [
    (_History(JAVA), None, "6c1f"),
    (_History(JAVA, COMPACTION, COMPACTION), None, "6c1f"),  # someone's compactions are walked past
    (_History(JAVA, OURS), None, None),  # tabletopic took over already
    (_History(OURS, JAVA), None, "6c1f"),  # the Java sink wrote after us: its mark is the newest
    (_History({"kafka.connect.offsets.control-iceberg.cg": "{}"}), None, "unknown"),
    (_History(COMPACTION), None, None),  # nobody's sink wrote it
    (_History(), None, None),  # no snapshot at all
    (_History(JAVA, COMPACTION, expired=1), None, None),  # the mark was expired
    (_History(JAVA), "audit", None),  # another branch than the one written
], ids=["head", "past-compactions", "ours-newer", "java-newer", "no-commit-id", "unmarked", "empty",
        "expired", "other-branch"])
def test_the_java_sinks_commit_is_the_newest_marked_snapshot(history: _History, branch: str | None,
                                                             commit: str | None) -> None:
    assert java_sink_commit(history, branch) == commit


def test_a_walk_stops_at_its_bound() -> None:
    assert java_sink_commit(_History(JAVA, *[COMPACTION] * 5), None, max_walk=5) is None
    assert java_sink_commit(_History(JAVA, *[COMPACTION] * 5), None, max_walk=6) == "6c1f"


def test_a_takeover_goes_on_from_the_group_and_is_refused_without_it() -> None:
    check_takeover({}, "connect-orders", [("orders", 0)], {})  # no Java sink: nothing to refuse
    check_takeover({"db.orders": "6c1f"}, "connect-orders", [("orders", 0)], {("orders", 0): 42})
    with pytest.raises(TakeoverError, match=r"db.orders \(commit 6c1f\).*connect-orders"):
        check_takeover({"db.orders": "6c1f"}, "connect-orders", [("orders", 0)], {("orders", 1): 7})
