"""Where each assigned partition starts: read from the tables, the consumer group and the Java sink's marks.

The tables are the source of truth (:mod:`tabletopic.offsets.resume` holds the rule).  While a start is
being decided, records fetched for the partition were judged against no position: they wait at a gate
until the decision is made, and are taken only if it left their position as it was.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from tabletopic.buffer.partition_ledger import PartitionLedger, Raised
from tabletopic.core.topic_partition import TopicPartition
from tabletopic.offsets.java_sink import check_takeover, java_sink_commit
from tabletopic.offsets.source_offsets import Recorded
from tabletopic.route.table_feeds import TableFeeds
from tabletopic.task.system_outages import SystemOutages
from tabletopic.write.iceberg_tables import IcebergTables
from tabletopic.write.java_errors import JavaErrorKind, classify, java_error_message
from tabletopic.write.table_handle import TableHandle

GroupOffsets = Callable[[list[TopicPartition]], Awaitable[dict[TopicPartition, int]]]


def table_reader(tables: IcebergTables, group_id: str) -> Callable[[str], Recorded]:
    """What a table records for ``group_id``, read from its newest metadata."""
    return lambda table: tables.recorded(table, group_id)


@dataclass(frozen=True)
class StartSettings:
    """What deciding a start needs of the connector's configuration."""

    group_id: str
    tables: tuple[str, ...]  # iceberg.tables: static routing's tables
    dynamic: bool  # iceberg.tables.dynamic-enabled: any table may hold this group's offsets


class StartTables(Protocol):
    """What deciding a start needs of the connector's tables (:class:`IcebergTables`). Thread phase only."""

    def get(self, name: str) -> TableHandle: ...

    def known(self) -> list[str]: ...

    def exists(self, name: str) -> bool: ...

    def try_load(self, name: str) -> TableHandle | None: ...

    def tables_recording(self, group_id: str, namespace: str | None = None) -> set[str]: ...


class BufferedRows(Protocol):
    """The writer's buffers (:class:`SinkWriter`): rows below what a table records are dropped."""

    def drop_below(self, raised: Raised, why: str) -> None: ...


class StartPositions:
    """Where each assigned partition starts reading, decided from the tables, the consumer group and the
    Java sink's offsets. Runs on the event loop, its table reads in threads (with the outages' retries);
    records of a partition wait at its gate while its start is being decided.
    """

    def __init__(self, settings: StartSettings, tables: StartTables, ledger: PartitionLedger,
                 writer: BufferedRows, read_table: Callable[[str], Recorded], group_offsets: GroupOffsets,
                 outages: SystemOutages, log: Any, feeds: TableFeeds) -> None:
        self._settings = settings
        self._feeds = feeds
        self._read_table = read_table
        self._tables = tables
        self._ledger = ledger
        self._writer = writer
        self._read_tables = outages.read  # retried while the catalog or storage fails
        self._log = log
        self._group_offsets = group_offsets  # the consumer group's committed offsets, read back
        self._gate = DecisionGate()
        self._catalog_scanned = False

    async def undecided(self, tp: TopicPartition) -> None:
        """Return once no start of ``tp`` is being decided (see :class:`DecisionGate`)."""
        await self._gate.undecided(tp)

    async def decide(self, tps: set[TopicPartition]) -> dict[TopicPartition, int]:
        """Read the tables' offsets for ``tps`` and decide where each must be read from (see
        :meth:`_decide`); records of ``tps`` that arrive meanwhile wait for the decision."""
        with self._gate.deciding(tps):
            return await self._decide(tps)

    async def _decide(self, tps: set[TopicPartition]) -> dict[TopicPartition, int]:
        """Where each partition of ``tps`` must be read from, by what the tables record.

        Records fetched meanwhile wait for the decision, so a partition has a position here only
        if it kept one from before.  It is sought only if that lies below the start, so delivery
        order never goes backwards past an accepted record; buffered rows below the tables'
        floors are dropped instead.
        """
        group = await self._group_offsets(sorted(tps))
        known = await self._read_tables(lambda: self._known_tables(tps, group))
        by_table = await self._read_tables(lambda: {t: self._read_table(t) for t in known})
        if self._feeds.starts_of_unrecorded and unanchored(tps, by_table, group):
            # A partition no table records, without a group offset: only another table's round start
            # may say where rows of it that a crash left owed began (offsets/table_scope.py).
            more = await self._read_tables(lambda: self._every_table(set(known)))
            by_table.update(await self._read_tables(lambda: {t: self._read_table(t) for t in more}))
            known = sorted(by_table)
        floors = {t: r.offsets for t, r in by_table.items()}
        java = await self._read_tables(lambda: self._java_sink_commits([t for t in known if not floors.get(t)]))
        check_takeover(java, self._settings.group_id, tps, group)
        if java:
            self._log.info("going on where the Iceberg Kafka Connect sink stopped, from the consumer group's "
                           "offsets", tables=java, group_id=self._settings.group_id)
        self._writer.drop_below(self._ledger.read_again(floors, tps), "the table already has")
        seeks: dict[TopicPartition, int] = {}
        round_starts = {t: r.round_start for t, r in by_table.items()}
        for tp in tps:
            start = self._ledger.resume_from(tp, floors, round_starts, group.get(tp))
            if start is None:
                continue
            current = self._ledger.position(tp)
            if current is None or current < start:
                # Rows from here on are all read again; an older start would make the next answer
                # claim offsets it holds no rows for.
                self._ledger.seek(tp, start)
                seeks[tp] = start
        self._log.info("positions from the tables", seeks={f"{t}[{p}]": o for (t, p), o in sorted(seeks.items())},
                       group={f"{t}[{p}]": o for (t, p), o in sorted(group.items())}, tables=known)
        return seeks

    def _java_sink_commits(self, tables: list[str]) -> dict[str, str]:
        found = {}
        for name in tables:
            handle = self._tables.get(name)
            commit = java_sink_commit(handle.snapshots(), handle.branch)
            if commit is not None:
                found[name] = commit
        return found

    def _known_tables(self, tps: set[TopicPartition], group: dict[TopicPartition, int]) -> list[str]:
        """The tables that may record ``tps``: in Table Topic mode each partition's own table alone, and
        only for a partition without a group offset. The group is committed only after a round every
        table took, so it lies at or below what the partition's table records: it is where the partition
        resumes, and a restart with a thousand topics need not read a thousand tables first."""
        if self._feeds.per_table:
            names = {t for t in (self._feeds.table_of(tp) for tp in tps if tp not in group) if t is not None}
        else:
            names = set(self._ledger.recorded()) | set(self._tables.known())
            for name in self._settings.tables:
                if name in names or self._tables.exists(name):
                    names.add(name)
            if self._settings.dynamic and not self._catalog_scanned:
                names |= self._scan_catalog()
                self._catalog_scanned = True
        return sorted(n for n in names if n in self._tables.known() or self._tables.try_load(n) is not None)

    def _every_table(self, read: set[str]) -> list[str]:
        """Every table of the connector not in ``read``: those this process used, and those its namespace
        holds (listed once per process; tables created later were created by this process)."""
        names = set(self._ledger.recorded()) | set(self._tables.known())
        if not self._catalog_scanned:
            names |= self._scan_catalog(self._feeds.namespace)
            self._catalog_scanned = True
        return sorted(names - read)

    def _scan_catalog(self, namespace: str | None = None) -> set[str]:
        """Tables whose snapshots carry our offsets, in ``namespace`` or anywhere: dynamic routing can
        have written any table."""
        try:
            return self._tables.tables_recording(self._settings.group_id, namespace)
        except Exception as exc:  # a catalog without namespace listing: only static and used tables count
            why = java_error_message(exc)
            if classify(exc) is JavaErrorKind.NO_SUCH_NAMESPACE:
                self._log.info("the catalog has no namespace yet: no table to go on from", catalog_answer=why)
            else:
                self._log.warning("could not list the catalog's tables", error=why)
            self._log.debug("listing the catalog's tables failed", exc_info=exc)
            return set()


class DecisionGate:
    """Partitions whose start is being decided, and a wait until none of a partition's decisions is under way.

    While the tables are read for a partition's start (an assignment, or after a rejected answer) its
    position is unknown, and records fetched meanwhile were judged against none: they may begin past
    that start, and taking them would skip the rows in between. They wait for the decision; if it moved
    the position, the seek brings them again. Two decisions may overlap (a rebalance during a re-read):
    a partition waits for both. Event-loop only.
    """

    def __init__(self) -> None:
        self._deciding: Counter[TopicPartition] = Counter()  # by how many decisions under way
        self._decided = asyncio.Event()  # set while no partition is being decided
        self._decided.set()

    def under_way(self, tp: TopicPartition) -> bool:
        return tp in self._deciding

    @contextlib.contextmanager
    def deciding(self, tps: set[TopicPartition]) -> Iterator[None]:
        """Hold ``tps`` at the gate for the block, however it ends (a failed or cancelled decision too)."""
        self._deciding.update(tps)
        self._decided.clear()
        try:
            yield
        finally:
            self._deciding.subtract(tps)
            self._deciding = +self._deciding
            if not self._deciding:
                self._decided.set()

    async def undecided(self, tp: TopicPartition) -> None:
        while tp in self._deciding:
            await self._decided.wait()


def unanchored(tps: set[TopicPartition], by_table: dict[str, Recorded], group: dict[TopicPartition, int]) -> bool:
    """Whether a partition of ``tps`` has neither a group offset nor a table of ``by_table`` that records it."""
    recorded = {tp for r in by_table.values() for tp in r.offsets}
    return any(tp not in group and tp not in recorded for tp in tps)
