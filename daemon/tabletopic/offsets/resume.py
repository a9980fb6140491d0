"""Where a partition resumes: the one rule, used by the sink when it seeks and by every view of its offsets.

A partition's rows may be spread over several tables, each recording its own offset for it.  Reading
resumes at the lowest place any of them still needs; a table that records more drops the rows below
its own offset itself.  Beside the tables' offsets:

* the consumer group's offset, when there is one, since the group is committed only after every table
  took a round;
* otherwise, where the tables' last rounds began: a crash between two tables' snapshots of one round
  leaves a table owed rows that records nothing of the partition, and only the round starts say where
  those rows began;
* for a partition that no table records yet, where the sink's own uncommitted rows began, which only a
  running sink knows.
"""

from __future__ import annotations

from collections.abc import Mapping

from tabletopic.core.topic_partition import TopicPartition
from tabletopic.offsets.source_offsets import Recorded

Offsets = Mapping[str, Mapping[TopicPartition, int]]  # per table


def lowest_recorded(recorded: Offsets) -> dict[TopicPartition, int]:
    """Per partition, the least offset any table records: what every table that records it holds, the
    figure committed lag is counted from (where the sink resumes may be lower: :func:`resume_positions`)."""
    out: dict[TopicPartition, int] = {}
    for offsets in recorded.values():
        for tp, offset in offsets.items():
            out[tp] = min(offset, out.get(tp, offset))
    return out


def resume_position(tp: TopicPartition, recorded: Offsets, round_starts: Offsets, group_offset: int | None = None,
                    uncommitted_from: int | None = None) -> int | None:
    """Where ``tp`` must be read from so that no table misses a row: None if nothing says."""
    candidates = [offsets[tp] for offsets in recorded.values() if tp in offsets]
    in_a_table = bool(candidates)
    if group_offset is not None:
        candidates.append(group_offset)
    else:
        candidates.extend(starts[tp] for starts in round_starts.values() if tp in starts)
    if not in_a_table and uncommitted_from is not None:
        # Once a table records the partition, its offset is at or below any uncommitted row, so an old
        # value here cannot force a long replay after the partition spent a while with another member.
        candidates.append(uncommitted_from)
    return min(candidates) if candidates else None


def resume_positions(recorded: Offsets, round_starts: Offsets | None = None,
                     group: Mapping[TopicPartition, int] | None = None) -> dict[TopicPartition, int]:
    """Every partition that a table records, or a round start names, with where it resumes."""
    round_starts = round_starts or {}
    group = group or {}
    named = {tp for offsets in (*recorded.values(), *round_starts.values()) for tp in offsets}
    out = {}
    for tp in named:
        position = resume_position(tp, recorded, round_starts, group.get(tp))
        if position is not None:
            out[tp] = position
    return out


def tables_resume(by_table: Mapping[str, Recorded],
                  group: Mapping[TopicPartition, int] | None = None) -> dict[TopicPartition, int]:
    """Where each partition the tables name resumes, by what they record and the group's offsets, if given."""
    return resume_positions({t: r.offsets for t, r in by_table.items()},
                            {t: r.round_start for t, r in by_table.items()}, group)
