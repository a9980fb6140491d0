"""Commits carry position deletes, except while the connector's own compaction of the table runs."""

from __future__ import annotations

import threading
from dataclasses import replace

from tabletopic.maintain.commit_positions import CommitPositions
from tests.unit.maintain.test_plan import SETTINGS

AT_COMMIT = replace(SETTINGS, conversion="commit", commit_max_rows=1_000)


def test_commits_carry_positions_only_where_they_may() -> None:
    positions = CommitPositions(lambda name: AT_COMMIT, lambda name: name != "db.unmaintained")
    with positions.committing("db.t") as rows:
        assert rows == 1_000
    with positions.committing("db.unmaintained") as rows:
        assert rows == 0
    looks = CommitPositions(lambda name: replace(AT_COMMIT, conversion="look"), lambda name: True)
    with looks.committing("db.t") as rows:
        assert rows == 0
    # A table another engine compacts: its commits never carry positions, whatever the connector's mode.
    beside = CommitPositions(lambda name: AT_COMMIT.beside_external_compaction() if name == "db.ext" else AT_COMMIT,
                             lambda name: True)
    with beside.committing("db.ext") as rows, beside.committing("db.t") as other:
        assert (rows, other) == (0, 1_000)
    positions.compaction_starts("db.t")
    with positions.committing("db.t") as rows, positions.committing("db.other") as other:
        assert (rows, other) == (0, 1_000)
    positions.compaction_ends("db.t")
    with positions.committing("db.t") as rows:
        assert rows == 1_000


def test_a_compaction_starts_after_the_commit_that_found_its_rows_has_landed() -> None:
    positions = CommitPositions(lambda name: AT_COMMIT, lambda name: True)
    inside, leave, started = threading.Event(), threading.Event(), threading.Event()

    def commit() -> None:
        with positions.committing("db.t") as rows:
            assert rows == 1_000
            inside.set()
            leave.wait()

    def compact() -> None:
        positions.compaction_starts("db.t")
        started.set()

    committer = threading.Thread(target=commit)
    committer.start()
    inside.wait()
    compaction = threading.Thread(target=compact)
    compaction.start()
    while "db.t" not in positions._compacting:  # the compaction has said it starts, and waits for its turn
        threading.Event().wait(0.001)
    assert not started.is_set()  # the commit still holds the table's turn
    leave.set()
    committer.join()
    compaction.join()
    assert started.is_set()
    with positions.committing("db.t") as rows:
        assert rows == 0


def test_no_commit_expires_snapshots_while_the_connector_maintains_the_table() -> None:
    bounded = replace(AT_COMMIT, max_snapshots=17)
    positions = CommitPositions(lambda name: bounded, lambda name: True)
    assert positions.snapshot_bound("db.t") == 17
    positions.maintenance_starts("db.t")
    assert (positions.snapshot_bound("db.t"), positions.snapshot_bound("db.other")) == (0, 17)
    positions.maintenance_ends("db.t")
    assert positions.snapshot_bound("db.t") == 17
    # A table another engine compacts: the connector cannot know its rewrites, so its bound stays.
    assert CommitPositions(lambda name: bounded.beside_external_compaction(), lambda name: True
                           ).snapshot_bound("db.ext") == 17
