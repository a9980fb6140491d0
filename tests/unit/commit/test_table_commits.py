"""What the coordinator reads of the tables (a missing table records nothing, an unreadable one is read
again next round, and any other fault is not hidden), and how a round commits them, through fakes of the
writer's Protocols."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pyarrow as pa
import pytest

from tabletopic.commit.table_commits import RoundOutcome, TableCommits
from tabletopic.offsets.source_offsets import Recorded
from tabletopic.offsets.table_scope import TableScope
from tabletopic.route.table_feeds import TableFeeds
from tabletopic.write.table_committer import CommitFenced, CommitResult
from tabletopic.write.table_handle import CatalogUnavailable, TableHandle, TableMissing
from tests.unit.fakes import TP0, files, metrics


class _Tables:
    def __init__(self) -> None:
        self.down = True
        self.reads: list[str] = []

    def known(self) -> list[str]:
        return ["db.ok", "db.gone", "db.down"]

    def recorded(self, name: str, group_id: str) -> Recorded:
        self.reads.append(name)
        if name == "db.gone":
            raise TableMissing("table db.gone does not exist")
        if name == "db.down" and self.down:
            raise CatalogUnavailable("cannot load table db.down: connection refused")
        if name == "db.bug":
            raise KeyError("a fault of the sink's own")
        return Recorded({TP0: 7 if name == "db.ok" else 3}, 1, "snapshot")


def _commits(tables: Any) -> TableCommits:
    return TableCommits(tables, _Lake(), metrics(), "connect-c", [], 10, 1.0, 1, TableFeeds(None))


def test_a_table_that_cannot_be_read_now_is_read_again_next_round_and_a_missing_one_records_nothing() -> None:
    tables = _Tables()
    commits = _commits(tables)
    assert commits.recorded() == {"db.ok": {TP0: 7}}
    tables.down, tables.reads = False, []
    assert commits.recorded() == {"db.ok": {TP0: 7}, "db.down": {TP0: 3}}
    assert sorted(tables.reads) == ["db.down", "db.gone"]  # what was read stays known
    commits.close()


def test_a_fault_that_is_neither_an_outage_nor_a_missing_table_is_not_taken_for_records_nothing() -> None:
    commits = _commits(_Tables())
    with pytest.raises(KeyError):
        commits.recorded(["db.bug"])
    commits.close()


class _Lake:
    """Tables that record what was committed to them, behind the writer's Protocols."""

    def __init__(self, refuse: str | None = None) -> None:
        self.recorded_now: dict[str, dict[tuple[str, int], int]] = {"db.a": {TP0: 5}, "db.b": {TP0: 5}}
        self.refuse = refuse
        self.commits: list[tuple[str, int, dict[Any, int], dict[Any, int]]] = []

    def known(self) -> list[str]:
        return sorted(self.recorded_now)

    def get(self, name: str, sample: pa.Schema | None = None) -> TableHandle:
        return TableHandle(name, None, pa.schema([]), 0, None)

    def recorded(self, name: str, group_id: str) -> Recorded:
        return Recorded(dict(self.recorded_now[name]), 1, "snapshot")

    def java_tables(self) -> Any:
        return None

    def commit(self, handle: TableHandle, files: list[dict[str, Any]] | None, positions: dict[Any, int],
               expected: dict[Any, int], max_timestamp_ms: int | None, epoch: int = -1,
               round_start: dict[Any, int] | None = None, scope: TableScope | None = None, task: str = "",
               valid_through_ms: int | None = None) -> CommitResult:
        self.commits.append((handle.name, len(files or []), dict(positions), dict(expected)))
        if handle.name == self.refuse:
            raise CommitFenced(f"{handle.name} moved on")
        self.recorded_now[handle.name] = dict(positions)
        return CommitResult(handle.name, len(self.commits), dict(positions), len(files or []), 1, 0.0,
                            {"total-data-files": 1, "total-delete-files": 0, "total-files-size": 1})

    def invalid_files(self, java_tables: Any, files: dict[str, list[dict[str, Any]]],
                      load: Any) -> str | None:
        return None


def _round(lake: _Lake) -> tuple[TableCommits, RoundOutcome]:
    commits = TableCommits(lake, lake, metrics(), "connect-c", [], 10, 5.0, 2, TableFeeds(None))

    async def one_round() -> RoundOutcome:
        commits.recorded()  # what the coordinator reads before it judges
        return await commits.commit({TP0: 9}, {TP0: 5}, {"db.a": files("a1"), "db.b": files("b1", "b2")},
                                    time.monotonic(), epoch=3, task="w-0")

    return commits, asyncio.run(one_round())


def test_a_round_commits_each_table_with_the_offsets_it_recorded_as_expected_and_learns_the_new_ones() -> None:
    lake = _Lake()
    commits, outcome = _round(lake)
    assert outcome.ok and outcome.snapshots.keys() == {"db.a", "db.b"}
    assert sorted(lake.commits) == [("db.a", 1, {TP0: 9}, {TP0: 5}), ("db.b", 2, {TP0: 9}, {TP0: 5})]
    assert outcome.recorded == {"db.a": {TP0: 9}, "db.b": {TP0: 9}} == commits.recorded()


def test_a_table_that_moved_on_fails_the_round_and_what_the_tables_record_is_read_again() -> None:
    lake = _Lake(refuse="db.b")
    commits, outcome = _round(lake)
    assert outcome.fenced and not outcome.ok and set(outcome.failed) == {"db.b"}
    assert outcome.snapshots.keys() == {"db.a"} and outcome.recorded == {}
    lake.recorded_now["db.b"] = {TP0: 30}  # the other writer's commit
    assert commits.recorded() == {"db.a": {TP0: 9}, "db.b": {TP0: 30}}  # forgotten, so read again
