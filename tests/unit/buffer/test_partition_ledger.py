"""The ledger: positions, first uncommitted offsets and floors, changed only by its operations."""

from __future__ import annotations

import pytest

from tabletopic.buffer.partition_ledger import PartitionLedger
from tests.unit.fakes import TP0, TP1


def _ledger(recorded: dict[str, dict[tuple[str, int], int]] | None = None) -> PartitionLedger:
    """A ledger that knows what each of ``recorded``'s tables records, as the sink task's reads teach it."""
    tables = recorded or {}
    ledger = PartitionLedger(lambda table: tables.get(table, {}))
    for table in tables:
        ledger.learn(table, ledger.read_recorded(table))
    return ledger


def test_accept_moves_the_position_and_keeps_where_uncommitted_rows_began() -> None:
    ledger = _ledger()
    ledger.accept(TP0, 0, 10)
    ledger.accept(TP0, 10, 25)
    assert ledger.cut() == ({TP0: 25}, {TP0: 0})


def test_a_commit_moves_the_first_uncommitted_offset_and_raises_floors() -> None:
    ledger = _ledger({"db.t": {}})
    assert ledger.floors("db.t") == {}
    ledger.accept(TP0, 0, 25)
    raised = ledger.committed({TP0: 10}, {"db.t": {TP0: 10}})
    assert raised == [("db.t", TP0, 10)] and ledger.floors("db.t") == {TP0: 10}
    assert ledger.cut() == ({TP0: 25}, {TP0: 10})


def test_after_a_rejection_the_restart_point_survives_and_floors_are_read_again() -> None:
    tables = {"db.t": {TP0: 5}}
    ledger = PartitionLedger(lambda table: tables[table])
    ledger.learn("db.t", ledger.read_recorded("db.t"))
    ledger.floors("db.t")
    ledger.accept(TP0, 5, 30)
    ledger.reset()
    tables["db.t"] = {TP0: 12}  # another writer committed meanwhile
    assert ledger.position(TP0) is None and ledger.uncommitted_from(TP0) == 5
    assert not ledger.knows("db.t")
    ledger.learn("db.t", ledger.read_recorded("db.t"))
    assert ledger.floors("db.t") == {TP0: 12}
    ledger.seek(TP0, 12)
    assert ledger.cut() == ({TP0: 12}, {TP0: 12})


def test_a_revoked_partition_loses_its_position_but_not_its_restart_point() -> None:
    ledger = _ledger()
    ledger.accept(TP0, 0, 10)
    ledger.accept(TP1, 0, 10)
    ledger.release([TP0])
    assert ledger.positions() == {TP1: 10} and ledger.uncommitted_from(TP0) == 0


def test_adopted_offsets_serve_new_floors_but_leave_buffered_rows_floors_alone() -> None:
    ledger = _ledger({"db.a": {TP0: 1}})
    assert ledger.floors("db.a") == {TP0: 1}
    ledger.adopt({"db.a": {TP0: 9}, "db.b": {TP0: 4}})
    assert ledger.floors("db.a") == {TP0: 1} and ledger.floors("db.b") == {TP0: 4}


def test_reading_the_tables_again_drops_floors_a_table_does_not_record() -> None:
    ledger = _ledger({"db.t": {TP0: 3, TP1: 3}})
    ledger.floors("db.t")
    raised = ledger.read_again({"db.t": {TP1: 8}}, [TP0, TP1])
    assert raised == [("db.t", TP1, 8)] and ledger.floors("db.t") == {TP1: 8}


def test_where_uncommitted_rows_began_counts_only_while_no_table_records_the_partition() -> None:
    ledger = _ledger()
    ledger.accept(TP0, 5, 25)
    ledger.reset()
    assert ledger.resume_from(TP0, {"db.a": {}}, {}, None) == 5
    assert ledger.resume_from(TP0, {"db.a": {TP0: 60}}, {}, None) == 60


def test_settled_below_is_the_least_offset_of_the_tables_that_record_the_partition() -> None:
    ledger = PartitionLedger(lambda table: {})
    assert ledger.settled_below(("t", 0)) is None
    ledger.read_again({"a": {("t", 0): 10, ("t", 1): 4}, "b": {("t", 0): 7}, "c": {}}, [("t", 0), ("t", 1)])
    assert ledger.settled_below(("t", 0)) == 7  # b has not taken 7..9 yet: their failures are not settled
    assert ledger.settled_below(("t", 1)) == 4
    ledger.committed({("t", 0): 12}, {"a": {("t", 0): 12}, "b": {("t", 0): 12}})
    assert ledger.settled_below(("t", 0)) == 12
    ledger.reset()
    assert ledger.settled_below(("t", 0)) is None


def test_a_commit_drops_the_floors_a_table_no_longer_records() -> None:
    # A table that recorded every partition (before tables were scoped) records its own alone after
    # its next commit: a floor left behind would make its next answer refused.
    ledger = _ledger({"tt.a": {TP0: 3, TP1: 8}})
    assert ledger.floors("tt.a") == {TP0: 3, TP1: 8}
    ledger.accept(TP0, 3, 10)
    ledger.committed({TP0: 10, TP1: 8}, {"tt.a": {TP0: 10}})
    assert ledger.floors("tt.a") == {TP0: 10}


def test_reading_partitions_again_leaves_the_floors_of_tables_not_read() -> None:
    ledger = _ledger({"tt.a": {TP0: 3, TP1: 8}, "tt.b": {TP1: 8}})
    ledger.floors("tt.a")
    ledger.floors("tt.b")
    raised = ledger.read_again({"tt.b": {TP1: 9}}, [TP1])
    assert raised == [("tt.b", TP1, 9)]
    assert ledger.floors("tt.a") == {TP0: 3, TP1: 8} and ledger.floors("tt.b") == {TP1: 9}


def test_what_is_settled_follows_every_change_of_what_the_tables_record() -> None:
    ledger = PartitionLedger(lambda table: {TP0: 5})
    assert ledger.settled_below(TP0) is None  # no table read yet
    ledger.learn("db.a", ledger.read_recorded("db.a"))
    assert ledger.settled_below(TP0) == 5
    ledger.committed({TP0: 9}, {"db.a": {TP0: 9}, "db.b": {TP0: 7, TP1: 3}})
    assert (ledger.settled_below(TP0), ledger.settled_below(TP1)) == (7, 3)
    ledger.adopt({"db.b": {TP0: 9, TP1: 4}})
    assert (ledger.settled_below(TP0), ledger.settled_below(TP1)) == (9, 4)
    ledger.read_again({"db.a": {TP0: 2}}, [TP0])
    assert ledger.settled_below(TP0) == 2
    ledger.reset()
    assert ledger.settled_below(TP0) is None


def test_the_floors_of_a_table_not_read_yet_are_refused_and_nothing_is_read() -> None:
    """The ledger makes no catalog call on the event loop: the sink task reads a table off the loop first."""
    reads: list[str] = []
    ledger = PartitionLedger(lambda table: reads.append(table) or {})
    with pytest.raises(LookupError, match=r"db\.t records is not known"):
        ledger.floors("db.t")
    assert reads == [] and not ledger.knows("db.t")
    ledger.learn("db.t", {TP0: 4})
    assert ledger.knows("db.t") and ledger.floors("db.t") == {TP0: 4} and reads == []
