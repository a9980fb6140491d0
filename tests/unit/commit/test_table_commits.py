"""What the coordinator reads of the tables: a missing table records nothing, an unreadable one is read
again next round, and any other fault is not hidden."""

from __future__ import annotations

from typing import Any

import pytest

from tabletopic.commit.table_commits import TableCommits
from tabletopic.offsets.source_offsets import Recorded
from tabletopic.write.table_handle import CatalogUnavailable, TableMissing
from tests.unit.fakes import TP0, metrics


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
    return TableCommits(tables, None, metrics(), "connect-c", [], 10, 1.0, 1, None)  # type: ignore[arg-type]


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
