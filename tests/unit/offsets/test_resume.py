from tabletopic.offsets.resume import lowest_recorded, resume_position, resume_positions, tables_resume
from tabletopic.offsets.source_offsets import Recorded

TP0, TP1 = ("orders", 0), ("orders", 1)


def test_resume_from_the_lowest_offset_any_table_records_or_the_group_has() -> None:
    recorded = {"db.a": {TP0: 50}, "db.b": {TP0: 30}}
    assert resume_position(TP0, recorded, {}) == 30
    assert resume_position(TP0, recorded, {}, group_offset=20) == 20
    assert resume_position(TP1, recorded, {}) is None  # nothing says: auto.offset.reset


def test_a_round_cut_between_two_tables_resumes_where_the_round_began() -> None:
    # db.a took the round 40..90 and died before db.b did: db.b, which records nothing of TP0, is owed
    # the round's rows from 40, and db.a drops them below its own 90.
    recorded, starts = {"db.a": {TP0: 90}, "db.b": {}}, {"db.a": {TP0: 40}}
    assert resume_position(TP0, recorded, starts) == 40
    # The group is committed only after a round every table took: it is at or below the round's start.
    assert resume_position(TP0, recorded, starts, group_offset=40) == 40
    assert resume_position(TP0, {"db.a": {TP0: 90}}, {}) == 90  # without the start, rows 40..89 were lost


def test_uncommitted_rows_count_only_while_no_table_records_the_partition() -> None:
    assert resume_position(TP0, {"db.a": {}}, {}, uncommitted_from=5) == 5
    assert resume_position(TP0, {"db.a": {TP0: 60}}, {}, uncommitted_from=5) == 60


def test_every_partition_a_table_records_or_a_round_start_names_has_a_position() -> None:
    recorded, starts = {"db.a": {TP0: 90}, "db.b": {TP1: 7}}, {"db.a": {TP0: 40, TP1: 3}}
    assert resume_positions(recorded, starts) == {TP0: 40, TP1: 3}
    assert resume_positions(recorded, starts, group={TP0: 60}) == {TP0: 60, TP1: 3}
    assert resume_positions(recorded) == {TP0: 90, TP1: 7}


def test_the_tables_views_say_where_the_sink_itself_would_resume() -> None:
    # What GET /connectors/{c}/offsets and `tabletopic status` report: the sink's own start, round starts included.
    by_table = {"db.a": Recorded({TP0: 90}, 3, "snapshot", 1, round_start={TP0: 40}),
                "db.b": Recorded({}, -1, "none")}
    assert tables_resume(by_table) == {TP0: 40}


def test_committed_lag_counts_from_what_every_table_holds_not_from_where_the_sink_resumes() -> None:
    recorded, starts = {"db.a": {TP0: 90}, "db.b": {TP0: 70, TP1: 7}}, {"db.a": {TP0: 40}}
    assert lowest_recorded(recorded) == {TP0: 70, TP1: 7}
    assert resume_positions(recorded, starts) == {TP0: 40, TP1: 7}
