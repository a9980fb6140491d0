"""Which partitions need more than their own table's record to know where they resume."""

from tabletopic.offsets.source_offsets import Recorded
from tabletopic.task.start_positions import unanchored

P, Q = ("tt.a", 0), ("tt.b", 0)


def test_a_partition_with_a_group_offset_or_a_table_record_is_anchored() -> None:
    by_table = {"tt.a": Recorded({P: 5}, 1, "snapshot")}
    assert not unanchored({P}, by_table, {})
    assert not unanchored({P, Q}, by_table, {Q: 0})


def test_a_partition_with_neither_needs_every_tables_round_starts() -> None:
    assert unanchored({P, Q}, {"tt.a": Recorded({P: 5}, 1, "snapshot")}, {})
    assert unanchored({Q}, {}, {})
