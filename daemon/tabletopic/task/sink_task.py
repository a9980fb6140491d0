"""One connector at work: the data path from fetched records to committed snapshots.

    consume → convert → transform → route → buffer → write → commit

The consumer (``consume/``) hands :class:`RawRecords` to :meth:`SinkTask.ingest`,
which converts, transforms and routes them and buffers the rows per table in
the sink writer.  The commit protocol (``commit/``) asks it to complete a write
for each answer, and tells it whether the answer was committed; only then are
the consumer group's offsets committed (for lag tools; the tables stay the
source of truth, see :meth:`on_assigned`).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

import numpy as np
import structlog

from tabletopic.buffer.partition_ledger import PartitionLedger
from tabletopic.config.connector import ConnectorConfig
from tabletopic.convert.isolation import SystemUnavailable, apply_isolating
from tabletopic.convert.records import RawRecords, SinkRecords
from tabletopic.core.topic_partition import TopicPartition
from tabletopic.observe.metrics import SinkMetrics
from tabletopic.route.unroutable import Unroutable
from tabletopic.stage.failed_records import FailedRecords, RecordFailure
from tabletopic.stage.staging import Staged, Staging, payload_sizes
from tabletopic.task.start_positions import StartPositions
from tabletopic.task.system_outages import SystemOutages
from tabletopic.write.java_errors import describe
from tabletopic.write.sink_writer import SinkWriter
from tabletopic.write.table_handle import TableError, TableMissing
from tabletopic.write.table_shaper import TableShaper
from tabletopic.write.write_result import WriteResult

log = structlog.get_logger(__name__)

# Hands the group's offsets over to be committed, without waiting: they only feed lag tools, and a round
# must not wait for the broker's answer.
GroupCommit = Callable[[dict[TopicPartition, int]], None]


@dataclass(frozen=True)
class TaskSettings:
    """What the sink task needs of the connector's configuration."""

    connector: str
    route_field: str | None  # iceberg.tables.route-field: named in the unroutable records' reports
    report_every_s: float  # how often unroutable records are reported: the commit interval
    skip_missing_tables: bool  # dynamic routing with tabletopic.routing.unroutable=skip, as the Iceberg sink does
    buffer_max_bytes: int  # tabletopic.buffer.max-bytes

    @classmethod
    def of(cls, config: ConnectorConfig) -> TaskSettings:
        return cls(config.name, config.route_field, config.commit_interval_ms / 1000,
                   config.dynamic_enabled and config.skip_unroutable, config.buffer_max_bytes)


class SinkTask:
    """The sink the consumer feeds and the worker role asks to write; its parts are built by the connector's
    runtime (:mod:`tabletopic.connectors.parts`)."""

    def __init__(self, config: TaskSettings, metrics: SinkMetrics, staging: Staging, ledger: PartitionLedger,
                 shaper: TableShaper, writer: SinkWriter, starts: StartPositions, failed: FailedRecords,
                 outages: SystemOutages) -> None:
        self.config = config
        self.metrics = metrics
        self.log = log.bind(connector=config.connector)
        self.staging = staging
        self.ledger = ledger
        self.shaper = shaper
        self.writer = writer
        self.starts = starts
        self.failed = failed
        self.outages = outages
        self.unroutable = Unroutable(metrics, self.log, config.route_field, config.report_every_s)
        self.assigned: set[TopicPartition] = set()
        self.active_topics: set[str] = set()  # topics records came from: Connect's GET /connectors/{c}/topics
        self._write_lock = asyncio.Lock()
        self._group_commit: GroupCommit | None = None
        self._reseek: Callable[[], Awaitable[None]] | None = None
        self._seek: Callable[[TopicPartition, int], None] | None = None
        self._waiting_bytes: Callable[[], int] = lambda: 0
        self.last_error: str | None = None  # why this worker's last answer was lost; cleared by a commit

    def bind_consumer(self, group_commit: GroupCommit, reseek: Callable[[], Awaitable[None]],
                      seek: Callable[[TopicPartition, int], None] | None = None,
                      waiting_bytes: Callable[[], int] = lambda: 0) -> None:
        self._group_commit, self._reseek = group_commit, reseek
        self._seek = seek
        self._waiting_bytes = waiting_bytes

    async def start(self) -> None:
        await self.failed.start()

    async def stop(self) -> None:
        await self.failed.stop()

    # -- ingest -----------------------------------------------------------------------------------
    async def ingest(self, raw: RawRecords) -> None:
        """Convert, transform, route and buffer one topic-partition's records, or fail them."""
        tp = (raw.topic, raw.partition)
        if tp not in self.assigned:
            return  # fetched before a revocation; the new owner reads it
        position = self.ledger.position(tp)
        self.active_topics.add(raw.topic)
        value_sizes, key_sizes = payload_sizes(raw.values), payload_sizes(raw.keys)
        self.metrics.records_consumed.labels(topic=raw.topic).inc(len(raw))
        self.metrics.bytes_consumed.labels(topic=raw.topic).inc(int(value_sizes.sum() + key_sizes.sum()))
        if not await self._still_continues(tp, position):
            return
        try:
            with self.metrics.timed("convert"):
                changes = self.staging.stage(raw, value_sizes, key_sizes)
            if changes.unrouted:
                self.unroutable.no_route(len(changes.unrouted))
            absent = await self.shaper.open({t: c for t, c in changes.changes.items()
                                             if not self.unroutable.known_missing(t)})
            if not await self._still_continues(tp, position):
                return  # a revocation or a seek came while the tables opened
            with self.metrics.timed("convert"):
                failures, staged = self._shape_all(changes, absent)
        except SystemUnavailable as exc:
            # Not the records' fault: nothing is dead-lettered, the position stays, and the partition
            # is read again from the first record not taken.
            start = position if position is not None else int(raw.offsets[0])
            if position is None:
                self.ledger.seek(tp, start)  # without a position the next batch would be taken as it comes
            await self.outages.failed(exc)
            if self._seek is not None and tp in self.assigned and self.ledger.position(tp) == start:
                self._seek(tp, start)
            return
        self.outages.recovered()
        settled = self.ledger.settled_below(tp)
        # Failures read again below what the tables hold (a restart went back to the consumer group's
        # offset, which is committed after the tables) failed before, and reached the dead-letter topic then.
        await self.failed.handle(raw, failures if settled is None else
                                 [f for f in failures if raw.offsets[f.index] >= settled])
        if not await self._still_continues(tp, position):
            # A revocation, or a seek after a rejected answer, came while the bad records were sent.
            return
        if not await self._tables_known(staged, tp, position):
            return
        if failures:
            bad = np.asarray(sorted({f.index for f in failures}), dtype=np.int64)
            staged = {t: [p.take(~np.isin(p.rows, bad)) for p in parts] for t, parts in staged.items()}
        with self.metrics.timed("buffer"):
            for table, parts in staged.items():
                self.writer.buffer(table, [p for p in parts if len(p)])
            self.ledger.accept(tp, int(raw.offsets[0]), raw.next_offset)
        self.metrics.buffered_records.set(self.writer.buffered_records)
        self.metrics.buffered_bytes.set(self.writer.buffered_bytes)
        self.writer.maybe_flush(staged)

    async def _tables_known(self, tables: Iterable[str], tp: TopicPartition, position: int | None) -> bool:
        return await learn_tables(self.ledger, self.outages, tables, lambda: self._still_continues(tp, position))

    async def _still_continues(self, tp: TopicPartition, position: int | None) -> bool:
        """Whether records judged against ``position`` may still be taken, once no start is being decided."""
        await self.starts.undecided(tp)
        return tp in self.assigned and self.ledger.position(tp) == position

    def _shape_all(self, staged: Staged,
                   absent: frozenset[str]) -> tuple[list[RecordFailure], dict[str, list[SinkRecords]]]:
        """Shape each table's staged changes (see staging.py) to it: what fails, and what goes to each table.
        The shaper opened them first (``absent``: the tables it found missing), so no catalog call is made here."""
        failures = staged.failures
        shaped: dict[str, list[SinkRecords]] = {}
        for table, changes in staged.changes.items():
            for change in changes:
                self._shape(table, change, failures, shaped, absent)
        # A record routed to several tables may fail in each: it is one bad record, told once.
        first = {f.index: f for f in reversed(failures)}
        return sorted(first.values(), key=lambda f: f.index), shaped

    def _shape(self, table: str, subset: SinkRecords, failures: list[RecordFailure],
               staged: dict[str, list[SinkRecords]], absent: frozenset[str]) -> None:
        if self.unroutable.known_missing(table):
            self.unroutable.no_table(table, len(subset))
            return
        try:
            prepared = apply_isolating(lambda s: self.shaper.prepare(table, s, absent), subset,
                                       lambda row, why: failures.append(RecordFailure("schema", row, why)))
        except TableMissing as exc:
            if self.config.skip_missing_tables:
                self.unroutable.no_table(table, len(subset))
            else:
                failures.extend(RecordFailure("schema", int(r), str(exc)) for r in subset.rows)
            return
        except TableError as exc:
            failures.extend(RecordFailure("schema", int(r), str(exc)) for r in subset.rows)
            return
        for parts, schema_failures in prepared:
            failures.extend(RecordFailure("schema", f.index, f.reason) for f in schema_failures)
            staged.setdefault(table, []).extend(parts)

    @property
    def over_memory(self) -> bool:
        """Past tabletopic.buffer.max-bytes: rows buffered or being written, and records fetched and not yet
        taken. A commit must drain them before more is fetched."""
        return self.writer.buffered_bytes + self._waiting_bytes() > self.config.buffer_max_bytes

    # -- answers (commit/worker.py asks; this is its WorkerSink) ------------------------------------
    async def complete_write(self, reason: str) -> WriteResult | None:
        """Write what is buffered into files, for an answer. None if writing failed: the rows are read again."""
        async with self._write_lock:
            try:
                return await self.writer.complete_write()
            except Exception as exc:
                why = describe(exc)
                self.last_error = f"writing files failed: {why}"
                self.log.error("writing files failed; nothing committed, records will be re-read",
                               error=why, reason=reason)
                self.writer.reset()
                if self._reseek is not None:
                    await self._reseek()
                return None

    async def answer_committed(self, ends: dict[TopicPartition, int],
                               recorded: dict[str, dict[TopicPartition, int]]) -> None:
        """The coordinator committed our answer: everything below ``ends`` is in the tables."""
        self.last_error = None
        self.writer.committed(ends, recorded)
        positions = {tp: o for tp, o in ends.items() if tp in self.assigned}
        if positions and self._group_commit is not None:
            self._group_commit(positions)

    async def answer_rejected(self, why: str) -> None:
        """Our answer will never be committed: drop what we hold and read again from the tables."""
        async with self._write_lock:
            self.metrics.answers_rejected.inc()
            self.last_error = f"fenced: {why}"
            self.log.error("commit fenced: our files were not committed; re-reading positions from the tables",
                           reason=why)
            self.writer.reset()
            if self._reseek is not None:
                await self._reseek()

    def adopt(self, recorded: dict[str, dict[TopicPartition, int]]) -> None:
        self.ledger.adopt(recorded)

    def committed_offsets(self, table: str) -> dict[TopicPartition, int]:
        """What ``table`` records for this connector, as this worker last heard."""
        return self.ledger.recorded().get(table, {})

    # -- assignment -------------------------------------------------------------------------------
    async def on_assigned(self, tps: set[TopicPartition]) -> dict[TopicPartition, int]:
        """Where to start each newly assigned partition: the lowest offset any table records.

        The group's committed offset also counts, so the start is never past it.
        """
        fresh = set(tps) - self.assigned
        self.assigned = set(tps)
        self.metrics.assigned_partitions.set(len(tps))
        if not fresh:
            return {}
        try:
            return await self.seek_positions(fresh)
        except BaseException:
            # Nowhere to start from: records fetched for these partitions meanwhile must not be kept.
            self.assigned -= fresh
            self.writer.release(fresh)
            raise

    async def seek_positions(self, tps: set[TopicPartition]) -> dict[TopicPartition, int]:
        """Where each of ``tps`` must be read from (see :class:`StartPositions`); the ledger has sought them."""
        return await self.starts.decide(tps)

    async def on_revoked(self, tps: set[TopicPartition]) -> None:
        """Let the partitions go; what they buffered is read again by their next owner.

        An answer already sent for them may still be committed: the tables then tell the new owner
        to start past it, or reject the new owner's overlapping answer.
        """
        if not tps:
            return
        everything_dropped = self.writer.release(tps)
        self.assigned -= set(tps)
        if everything_dropped and self.assigned and self._reseek is not None:
            await self._reseek()
        for topic, partition in tps:
            self.metrics.forget_partition(topic, partition)

    # -- readiness --------------------------------------------------------------------------------
    def ready(self) -> tuple[bool, str]:
        if not self.assigned:
            return False, "no partitions assigned"
        if self.outages.in_a_row:
            return False, f"catalog, storage or schema registry unavailable: {self.outages.last_error}"
        if self.last_error:
            return False, f"last commit failed: {self.last_error}"
        return True, "ok"


async def learn_tables(ledger: PartitionLedger, outages: SystemOutages, tables: Iterable[str],
                       continues: Callable[[], Awaitable[bool]]) -> bool:
    """Whether records may still be taken (``continues``), once the ledger knows what each of ``tables``
    records: their rows' floors come from it. The shaper read it when it opened the tables, but its read
    may have failed, or a reset (a failed commit) since may have forgotten it; it is then read here, off
    the loop, with the outage's backoff. Nothing is awaited after the last check, so the caller buffers
    against what the ledger knows."""
    tables = list(tables)
    while unknown := [t for t in tables if not ledger.knows(t)]:
        for table in unknown:
            ledger.learn(table, await outages.read(functools.partial(ledger.read_recorded, table)))
        if not await continues():
            return False
    return True
