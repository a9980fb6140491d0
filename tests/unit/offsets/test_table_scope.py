"""What one table's snapshot records when tables record only the partitions that feed them."""

from tabletopic.offsets.resume import resume_position
from tabletopic.offsets.table_scope import TableScope, unrecorded

P, Q, R = ("tt.a", 0), ("tt.b", 0), ("tt.c", 0)


def _scope_of_a(fresh: frozenset[tuple[str, int]]) -> TableScope:
    return TableScope(lambda tp: tp[0] == "tt.a", fresh)


def test_a_table_records_the_offsets_of_its_own_partitions_only() -> None:
    scope = _scope_of_a(frozenset())
    # What the table recorded before (written before tables were scoped) is dropped as well.
    assert scope.offsets({P: 10, Q: 7, R: 3}) == {P: 10}


def test_round_starts_of_partitions_no_table_records_go_into_every_table_of_the_round() -> None:
    fresh = unrecorded([P, Q, R], {"tt.a": {P: 5}, "tt.b": {}, "tt.c": {R: 9}})
    assert fresh == {Q}
    assert _scope_of_a(fresh).round_start({P: 5, Q: 0, R: 9}) == {P: 5, Q: 0}
    # Once its own table records Q, the other tables' snapshots stop naming it.
    assert _scope_of_a(unrecorded([P, Q, R], {"tt.b": {Q: 4}, "tt.c": {R: 9}})).round_start({Q: 0}) == {}


def test_a_round_cut_between_two_tables_resumes_from_the_other_tables_round_start() -> None:
    # The round read P 5..20 and Q 0..8; tt.a took it and the daemon died before tt.b, which records
    # nothing of Q yet. Q's start is only in tt.a's snapshot: reading resumes there, not at
    # auto.offset.reset, which may lie past it.
    fresh = unrecorded([P, Q], {"tt.a": {P: 5}})
    scope = _scope_of_a(fresh)
    recorded_a, starts_a = scope.offsets({P: 20, Q: 8}), scope.round_start({P: 5, Q: 0})
    assert recorded_a == {P: 20}
    tables, starts = {"tt.a": recorded_a, "tt.b": {}}, {"tt.a": starts_a}
    assert resume_position(Q, tables, starts) == 0
    assert resume_position(P, tables, starts) == 5  # tt.a drops P's rows below its own 20
    # With a group offset (committed only after a round every table took) the group decides.
    assert resume_position(Q, tables, starts, group_offset=0) == 0


def test_a_partition_resumes_by_the_tables_that_record_it_alone() -> None:
    # tt.a recorded Q before tables were scoped, and far behind: it does not hold Q back once scoped.
    tables = {"tt.b": {Q: 400}}
    assert resume_position(Q, tables, {}) == 400
    assert resume_position(Q, {**tables, "tt.a": {Q: 7}}, {}) == 7  # the unscoped record would
