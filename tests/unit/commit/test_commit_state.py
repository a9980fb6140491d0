"""A round's completion and the judging rules, without a broker or tables."""

from __future__ import annotations

from tabletopic.commit.commit_state import CommitState, clean_after, judge
from tabletopic.write.write_result import TableFiles
from tests.unit.fakes import TP0, TP1, answer, files


def _state() -> CommitState:
    return CommitState("r1", 1, frozenset({TP0, TP1}), started=100.0)


def test_an_idle_members_empty_answer_completes_the_round() -> None:
    state = _state()
    state.add(answer("a1", "r1", [TP1], {TP1: (0, 10)}, tables={"db.t": files("/wh/1")}))
    assert not state.is_complete and state.missing() == [TP0]
    state.add(answer("a2", "r1", [TP0]))  # owns the first partition, has nothing to say
    assert state.is_complete


def test_answers_to_another_round_do_not_complete_this_one() -> None:
    state = _state()
    state.add(answer("a1", "r0", [TP0, TP1]))
    state.add(answer("a2", None, [TP0, TP1]))
    assert not state.is_complete


def test_two_answers_for_one_partition_only_the_first_is_accepted() -> None:
    first = answer("a1", "r1", [TP0], {TP0: (0, 10)}, {"db.t": {}}, {"db.t": files("/wh/1")})
    second = answer("a2", "r1", [TP0], {TP0: (0, 12)}, {"db.t": {}}, {"db.t": files("/wh/2")})
    result = judge([first, second], {})
    assert [a.answer_id for a in result.accepted] == ["a1"]
    assert "already covers t[0]" in result.rejected["a2"]
    assert result.positions() == {TP0: 10}


def test_floors_that_the_tables_moved_past_are_rejected() -> None:
    stale = answer("a1", "r1", [TP0], {TP0: (10, 20)}, {"db.t": {TP0: 5}}, {"db.t": files("/wh/1")})
    result = judge([stale], {"db.t": {TP0: 10}})
    assert "records 10 for t[0], the rows were cut at 5" in result.rejected["a1"]


def test_an_answer_the_tables_already_hold_is_rejected() -> None:
    # Its verdict was lost and it was sent again after the commit: the tables say it is in.
    again = answer("a1", "r2", [TP0], {TP0: (0, 10)}, {"db.t": {}}, {"db.t": files("/wh/1")})
    result = judge([again], {"db.t": {TP0: 10}})
    assert "records 10 for t[0], the rows were cut at None" in result.rejected["a1"]


def test_a_range_read_again_below_what_the_table_holds_is_accepted_and_moves_nothing_back() -> None:
    # A worker sought back to a stale group offset (5) and read up to 10, which the table holds: its
    # rows were cut at the table's floor (10), so none is in the answer. Refusing it made the worker
    # read 5..10 again for ever once no record followed (the chaos test caught it).
    again = answer("a1", "r2", [TP0], {TP0: (5, 10)}, {"db.t": {TP0: 10}}, {})
    result = judge([again], {"db.t": {TP0: 10}})
    assert [a.answer_id for a in result.accepted] == ["a1"] and result.tables() == {}


def test_a_table_that_lags_behind_another_gets_its_rows_below_the_others_offset() -> None:
    # db.a holds t[0] up to 10, db.b only up to 5 (its commit failed once): the rows 5..10 read again
    # are db.b's, cut at its floor, and must be accepted even though db.a already holds that range.
    catch_up = answer("a1", "r2", [TP0], {TP0: (5, 10)}, {"db.a": {TP0: 10}, "db.b": {TP0: 5}},
                      {"db.b": files("/wh/b", records=5)})
    result = judge([catch_up], {"db.a": {TP0: 10}, "db.b": {TP0: 5}})
    assert [a.answer_id for a in result.accepted] == ["a1"]
    assert result.positions() == {TP0: 10} and list(result.tables()) == ["db.b"]


def test_the_round_starts_where_its_accepted_answers_began_reading() -> None:
    first = answer("a1", "r1", [TP0], {TP0: (4, 10)}, {"db.t": {}}, {"db.t": files("/wh/1")})
    second = answer("a2", "r1", [TP1], {TP1: (7, 9)}, {"db.t": {}}, {"db.t": files("/wh/2")})
    refused = answer("a3", "r1", [TP0], {TP0: (0, 12)}, {"db.t": {}}, {"db.t": files("/wh/3")})
    result = judge([first, second, refused], {})
    assert result.starts() == {TP0: 4, TP1: 7} and result.positions() == {TP0: 10, TP1: 9}


def test_a_gap_after_what_the_tables_record_is_rejected() -> None:
    gap = answer("a1", "r1", [TP0], {TP0: (15, 20)}, {"db.t": {TP0: 10}}, {"db.t": files("/wh/1")})
    assert "a gap" in judge([gap], {"db.t": {TP0: 10}}).rejected["a1"]


def test_files_replayed_with_a_new_id_and_no_ranges_are_rejected() -> None:
    replay = answer("forged", "r1", [TP0], {}, {"db.t": {}}, {"db.t": files("/wh/1")})
    assert "files without offset ranges" in judge([replay], {}).rejected["forged"]


def test_merging_accepted_answers_concatenates_files_and_sums_records() -> None:
    one = answer("a1", "r1", [TP0], {TP0: (0, 10)}, {"db.t": {}}, {"db.t": files("/wh/1", records=10)})
    two = answer("a2", "r1", [TP1], {TP1: (0, 5)}, {"db.t": {}}, {"db.t": files("/wh/2", records=5)})
    merged = judge([one, two], {}).tables()["db.t"]
    assert [f["file-path"] for f in merged.files] == ["/wh/1", "/wh/2"] and merged.records == 15


def test_a_round_without_rows_for_a_table_lets_the_next_range_start_past_what_it_records() -> None:
    # db.t records 30. A committed round took 30..31 (a dead-lettered record: no files for any table),
    # so db.t still records 30. The next answer starts at 31 with rows for db.t, cut at its floor 30.
    empty = answer("a1", "r1", [TP0], {TP0: (30, 31)}, {}, {})
    first = judge([empty], {"db.t": {TP0: 30}})
    clean = clean_after(first.starts(), first.positions(), first.tables(), {"db.t": {TP0: 30}}, {})
    assert clean == {"db.t": {TP0: 31}}
    nxt = answer("a2", "r2", [TP0], {TP0: (31, 61)}, {"db.t": {TP0: 30}}, {"db.t": files("/wh/2")})
    assert "a gap" in judge([nxt], {"db.t": {TP0: 30}}).rejected["a2"]  # without the memory: read again
    second = judge([nxt], {"db.t": {TP0: 30}}, clean)
    assert [a.answer_id for a in second.accepted] == ["a2"]
    # Once db.t records 61 itself, there is nothing left to remember.
    assert clean_after(second.starts(), second.positions(), ["db.t"], {"db.t": {TP0: 61}}, clean) == {}


def test_a_table_that_lags_elsewhere_gains_no_memory_and_stale_floors_stay_refused() -> None:
    # db.b records 5 but the round took 20..30: nothing says 5..20 held no rows for db.b.
    round_ = answer("a1", "r1", [TP0], {TP0: (20, 30)}, {"db.a": {TP0: 20}}, {"db.a": files("/wh/a")})
    taken = judge([round_], {"db.a": {TP0: 20}, "db.b": {TP0: 5}})
    assert [a.answer_id for a in taken.accepted] == ["a1"]
    assert clean_after(taken.starts(), taken.positions(), ["db.a"], {"db.a": {TP0: 30}, "db.b": {TP0: 5}}, {}) == {}
    # Memory never excuses rows cut against a floor the table no longer records (a zombie's).
    stale = answer("a2", "r2", [TP0], {TP0: (31, 40)}, {"db.t": {TP0: 10}}, {"db.t": files("/wh/z")})
    why = judge([stale], {"db.t": {TP0: 30}}, {"db.t": {TP0: 31}}).rejected["a2"]
    assert "the rows were cut at 10" in why


def test_files_written_longer_ago_than_maintenance_allows_are_refused() -> None:
    # Orphan removal may take a file twice this old: such files must never reach a snapshot.
    old = TableFiles([{"file-path": "/wh/old", "content": "data"}], 1, None, written_at_ms=900_000)
    new = TableFiles([{"file-path": "/wh/new", "content": "data"}], 1, None, written_at_ms=999_000)
    late = answer("a1", "r1", [TP0], {TP0: (0, 1)}, {"db.t": {}}, {"db.t": old})
    fresh = answer("a2", "r1", [TP1], {TP1: (0, 1)}, {"db.t": {}}, {"db.t": new})
    result = judge([late, fresh], {}, now_ms=1_000_000, max_file_wait_ms=60_000)
    assert [a.answer_id for a in result.accepted] == ["a2"]
    assert "written 100s ago" in result.rejected["a1"]
    assert [a.answer_id for a in judge([late], {}, now_ms=1_000_000).accepted] == ["a1"]  # no maintenance: no bound
