"""Where each partition stands between fetch and commit: the one owner of that state.

Per partition the ledger keeps the *position* (the next offset to take) and the
first offset taken but not yet in a committed snapshot.  Per table it keeps the
offsets the table is known to *record*, and the *floors* of the rows buffered for
it (what it recorded when they were cut; rows below a floor are already in the
table).  The consumer, the sink and the writer change it only through the named
operations below.  Terms are defined in ``docs/design/exactly-once.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from tabletopic.core.topic_partition import TopicPartition
from tabletopic.offsets.resume import Offsets, lowest_recorded, resume_position

Raised = list[tuple[str, TopicPartition, int]]  # (table, partition, new floor): buffered rows below it must go


class PartitionLedger:
    """Each partition's position, what the tables record and where uncommitted rows begin. Event loop only,
    but for :meth:`read_recorded`, which touches no state."""

    def __init__(self, read_recorded: Callable[[str], dict[TopicPartition, int]]) -> None:
        self._read_recorded = read_recorded  # reads what a table records, from its snapshots
        self._positions: dict[TopicPartition, int] = {}
        # Survives resets and revocations: a failed write or a revocation's lost answer must re-read
        # from here while no table records the partition yet.
        self._uncommitted_from: dict[TopicPartition, int] = {}
        self._recorded: dict[str, dict[TopicPartition, int]] = {}
        # Per partition, the least offset any table records: asked for every batch taken, made again from
        # _recorded after it changes (once a round), not from every table for every batch.
        self._lowest: dict[TopicPartition, int] | None = None
        self._floors: dict[str, dict[TopicPartition, int]] = {}

    # -- reading --------------------------------------------------------------------------------------
    def position(self, tp: TopicPartition) -> int | None:
        return self._positions.get(tp)

    def positions(self) -> dict[TopicPartition, int]:
        return dict(self._positions)

    def uncommitted_from(self, tp: TopicPartition) -> int | None:
        return self._uncommitted_from.get(tp)

    def settled_below(self, tp: TopicPartition) -> int | None:
        """Every record of ``tp`` below this offset is settled: each table that records ``tp`` holds an
        offset past it, so its rows are in the tables and, failed, it was dead-lettered before that
        snapshot (a failure is sent, and acknowledged, before its fetch is taken). None if no table
        records ``tp``."""
        if self._lowest is None:
            self._lowest = lowest_recorded(self._recorded)
        return self._lowest.get(tp)

    def resume_from(self, tp: TopicPartition, recorded: Offsets, round_starts: Offsets,
                    group_offset: int | None) -> int | None:
        """Where ``tp`` must be read from (see :mod:`tabletopic.offsets.resume`); only the ledger knows
        where a partition's dropped, uncommitted rows began."""
        return resume_position(tp, recorded, round_starts, group_offset, self._uncommitted_from.get(tp))

    def recorded(self) -> dict[str, dict[TopicPartition, int]]:
        return {t: dict(o) for t, o in self._recorded.items()}

    def knows(self, table: str) -> bool:
        """Whether what ``table`` records is known, so that :meth:`floors` can answer."""
        return table in self._floors or table in self._recorded

    def read_recorded(self, table: str) -> dict[TopicPartition, int]:
        """What ``table`` records, read from its snapshots; touches no state, so a thread may call it."""
        return dict(self._read_recorded(table))

    def learn(self, table: str, recorded: dict[TopicPartition, int]) -> None:
        """What :meth:`read_recorded` read in a thread; a table known meanwhile keeps what it knows."""
        if table not in self._recorded:
            self._recorded[table] = dict(recorded)
            self._lowest = None

    def floors(self, table: str) -> dict[TopicPartition, int]:
        """The floors of ``table``'s buffered rows; a table first buffered takes what it records now, which
        must be known (:meth:`knows`): the ledger reads nothing itself, so nothing here waits on a catalog."""
        if table not in self._floors:
            if table not in self._recorded:
                raise LookupError(f"what {table} records is not known: read it (read_recorded, learn) first")
            self._floors[table] = dict(self._recorded[table])
        return self._floors[table]

    def cut(self) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        """Positions and, per partition, the first uncommitted offset: the ranges of an answer."""
        positions = dict(self._positions)
        return positions, {tp: self._uncommitted_from.get(tp, end) for tp, end in positions.items()}

    # -- operations -----------------------------------------------------------------------------------
    def accept(self, tp: TopicPartition, first: int, next_offset: int) -> None:
        """Records ``first`` .. ``next_offset - 1`` were taken (buffered or failed on purpose)."""
        self._uncommitted_from.setdefault(tp, first)
        if next_offset > self._positions.get(tp, -1):
            self._positions[tp] = next_offset

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """The partition is read again from ``offset``: everything from there on is uncommitted."""
        self._positions[tp] = offset
        self._uncommitted_from[tp] = offset

    def committed(self, ends: dict[TopicPartition, int], recorded: dict[str, dict[TopicPartition, int]]) -> Raised:
        """A snapshot holds everything below ``ends``; ``recorded`` is what each table records now."""
        for tp, offset in ends.items():
            if tp in self._uncommitted_from:
                self._uncommitted_from[tp] = max(self._uncommitted_from[tp], offset)
        self._recorded.update({t: dict(o) for t, o in recorded.items()})
        self._lowest = None
        raised: Raised = []
        for table, floors in self._floors.items():
            if table not in recorded:
                continue
            now = recorded[table]
            # The table records only the partitions that feed it (route/table_feeds.py).
            for tp in [tp for tp in floors if tp in ends and tp not in now]:
                del floors[tp]
            for tp in sorted(now.keys() & ends.keys()):
                floors[tp] = now[tp]
                raised.append((table, tp, floors[tp]))
        return raised

    def adopt(self, recorded: dict[str, dict[TopicPartition, int]]) -> None:
        """What the coordinator says the tables record; floors of rows already buffered stay."""
        self._recorded.update({t: dict(o) for t, o in recorded.items() if o or t in self._recorded})
        self._lowest = None

    def read_again(self, recorded: dict[str, dict[TopicPartition, int]], tps: Iterable[TopicPartition]) -> Raised:
        """After an assignment or a seek: what each table records of ``tps``, read from the tables."""
        self._recorded.update({t: dict(o) for t, o in recorded.items()})
        self._lowest = None
        raised: Raised = []
        for tp in tps:
            for table, floors in self._floors.items():
                if table not in recorded:
                    continue  # not read: in Table Topic mode, a table that ``tps`` do not feed
                offset = recorded[table].get(tp)
                if offset is None:
                    floors.pop(tp, None)
                else:
                    floors[tp] = offset
                    raised.append((table, tp, offset))
        return raised

    def release(self, tps: Iterable[TopicPartition]) -> None:
        """Revoked partitions: their position goes; where their uncommitted rows began stays."""
        for tp in tps:
            self._positions.pop(tp, None)

    def reset(self) -> None:
        """Everything uncommitted was dropped: positions and floors are decided again from the tables."""
        self._positions.clear()
        self._floors.clear()
        self._recorded.clear()
        self._lowest = None
