"""One round's bookkeeping: which partitions have answered, whether time is up, and the judging.

A fresh :class:`CommitState` is made for every round and dropped after it; nothing
here touches Kafka, Spark or a clock of its own, so the rules can be tested alone.
Terms (round, answer, floor, epoch) are defined in ``docs/design/exactly-once.md``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from tabletopic.commit.events import Answer
from tabletopic.core.topic_partition import TopicPartition
from tabletopic.write.write_result import TableFiles


@dataclass
class Judgement:
    accepted: list[Answer]
    rejected: dict[str, str]  # answer id -> why

    def positions(self) -> dict[TopicPartition, int]:
        """The next offset to read per partition, once the accepted answers are committed."""
        return {tp: end for answer in self.accepted for tp, (_, end) in answer.ranges.items()}

    def starts(self) -> dict[TopicPartition, int]:
        """Where the accepted answers began reading each partition: every row they hold is at or past it."""
        out: dict[TopicPartition, int] = {}
        for answer in self.accepted:
            for tp, (start, _) in answer.ranges.items():
                out[tp] = min(start, out.get(tp, start))
        return out

    def tables(self) -> dict[str, TableFiles]:
        """Every accepted answer's files, merged per table."""
        merged: dict[str, TableFiles] = {}
        for answer in self.accepted:
            for table, files in answer.tables.items():
                merged[table] = merged[table].merged(files) if table in merged else files
        return merged


@dataclass
class CommitState:
    commit_id: str
    epoch: int
    partitions: frozenset[TopicPartition]  # every partition of the connector: the round waits for them all
    started: float  # monotonic seconds
    covered: set[TopicPartition] = field(default_factory=set)

    def add(self, answer: Answer) -> None:
        """An answer to this round: its member's partitions are covered, whether or not it carries data.

        An idle member answers with what it owns and nothing else, so a round never waits for data
        that will not come.
        """
        if answer.commit_id == self.commit_id:
            self.covered |= answer.assigned

    @property
    def is_complete(self) -> bool:
        return self.covered >= self.partitions

    def missing(self) -> list[TopicPartition]:
        return sorted(self.partitions - self.covered)


def judge(answers: Iterable[Answer], recorded: dict[str, dict[TopicPartition, int]],
          clean: dict[str, dict[TopicPartition, int]] | None = None, now_ms: float = 0.0,
          max_file_wait_ms: float | None = None) -> Judgement:
    """Accept each answer whose rows continue what the tables record, and no two that overlap.

    ``recorded`` is what every known table records for this connector now.  An answer is
    accepted only if, for each of its partitions, every table's floor is what the table records
    (so its rows were cut against the present, not against a state another commit has moved
    past) and its range starts at the newest recorded offset.  That is what makes a resent, late,
    replayed or zombie answer harmless: it is committed once at most.

    ``clean`` holds, per table, offsets past what it records up to which the coordinator's own
    committed rounds hold no rows for it (records that went to other tables, to the dead-letter
    topic, or nowhere): a range may start there, as if the table recorded it.

    ``max_file_wait_ms``, when the connector maintains its tables, bounds how long ago (before
    ``now_ms``) an answer's files may have been written: orphan removal may take a file once it is
    twice that old, so none may land in a snapshot after that.
    """
    effective = {t: {tp: max(o, (clean or {}).get(t, {}).get(tp, o)) for tp, o in offs.items()}
                 for t, offs in recorded.items()}
    accepted: list[Answer] = []
    rejected: dict[str, str] = {}
    claimed: set[TopicPartition] = set()
    for answer in answers:
        why = _too_old(answer, now_ms, max_file_wait_ms) or _why_not(answer, recorded, effective, claimed)
        if why is None:
            accepted.append(answer)
            claimed |= set(answer.ranges)
        else:
            rejected[answer.answer_id] = why
    return Judgement(accepted, rejected)


def _too_old(answer: Answer, now_ms: float, max_file_wait_ms: float | None) -> str | None:
    if max_file_wait_ms is None:
        return None
    for table, files in answer.tables.items():
        if files.written_at_ms is not None and now_ms - files.written_at_ms > max_file_wait_ms:
            return (f"files for {table} were written {(now_ms - files.written_at_ms) / 1000:.0f}s ago, longer "
                    f"than half of tabletopic.maintenance.orphans.older-than-ms allows")
    return None


def _why_not(answer: Answer, recorded: dict[str, dict[TopicPartition, int]],
             effective: dict[str, dict[TopicPartition, int]], claimed: set[TopicPartition]) -> str | None:
    if answer.tables and not answer.ranges:
        return "files without offset ranges: nothing says which records they hold"
    overlap = claimed & set(answer.ranges)
    if overlap:
        return f"another answer in this round already covers {_names(overlap)}"
    for tp, (start, _) in answer.ranges.items():
        known = [offsets[tp] for offsets in effective.values() if tp in offsets]
        if known and start > max(known):
            return f"{_name(tp)} starts at {start}, past what the tables record ({max(known)}): a gap"
    # A range may end at or below what a table records: a worker read again from an older offset (a
    # consumer group's, say) than that table holds. Its rows there are all below the table's floor,
    # so the answer holds none of them, and the table's offsets do not move back (see
    # TableCommitter). Refusing it instead would have the worker read the same range again, for ever,
    # once no record follows it. A resent answer that is already in is refused by its floors below.
    # Only the partitions a table or its floors name can differ: with a thousand tables each naming its
    # own, looking at every range for every table was a million look-ups an answer.
    for table in {*answer.floors, *answer.tables}:
        floors, offsets = answer.floors.get(table, {}), recorded.get(table, {})
        reach = effective.get(table, {})
        for tp in sorted((floors.keys() | offsets.keys()) & answer.ranges.keys()):
            if offsets.get(tp) != floors.get(tp):
                return f"table {table} records {offsets.get(tp)} for {_name(tp)}, the rows were cut at {floors.get(tp)}"
        for tp in sorted(reach.keys() & answer.ranges.keys()):
            if answer.ranges[tp][0] > reach[tp]:
                return f"{_name(tp)} starts at {answer.ranges[tp][0]}, past what {table} records ({offsets[tp]})"
    return None


def _name(tp: TopicPartition) -> str:
    return f"{tp[0]}[{tp[1]}]"


def _names(tps: Iterable[TopicPartition]) -> str:
    return ", ".join(_name(tp) for tp in sorted(tps))


def clean_after(starts: dict[TopicPartition, int], positions: dict[TopicPartition, int], with_files: Iterable[str],
                recorded: dict[str, dict[TopicPartition, int]],
                clean: dict[str, dict[TopicPartition, int]]) -> dict[str, dict[TopicPartition, int]]:
    """``clean`` (see :func:`judge`) once a round has landed that read each partition from ``starts`` up to
    ``positions`` (its accepted answers' ranges, :meth:`Judgement.starts` and :meth:`Judgement.positions`).

    ``recorded`` is what the tables record after it. A table that got no files in the round, and
    held or was clean up to where an accepted range began, is clean up to where the range ends:
    the round's answers held no rows for it there.
    """
    files = set(with_files)
    out = {t: dict(o) for t, o in clean.items()}
    for table, offsets in recorded.items():
        if table in files:
            continue
        for tp in offsets.keys() & positions.keys():
            start, end = starts[tp], positions[tp]
            reach = max(offsets[tp], out.get(table, {}).get(tp, offsets[tp]))
            if reach >= start and end > offsets[tp]:
                out.setdefault(table, {})[tp] = max(reach, end)
    # What a table now records itself needs no memory.
    kept = {t: {tp: o for tp, o in offs.items() if o > recorded.get(t, {}).get(tp, -1)} for t, offs in out.items()}
    return {t: offs for t, offs in kept.items() if offs}
