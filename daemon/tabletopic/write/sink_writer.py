"""The sink writer: buffers routed rows per table, writes them to files, and completes a write per answer.

Rows wait in per-table buffers; a large buffer is written early (its files wait
for the next answer).  :meth:`SinkWriter.complete_write` writes everything left
and returns a :class:`~tabletopic.commit.worker.WriteResult`: the files as JSON,
with the ranges and floors they cover, taken from the ledger in the same step of
the event loop as the buffers were drained, so an answer never claims an offset
whose record is in no file.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Collection, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa
import structlog

from tabletopic.buffer.partition_ledger import PartitionLedger, Raised
from tabletopic.buffer.table_buffer import Drained, TableBuffer
from tabletopic.convert.converter import Failure
from tabletopic.convert.key_rows import key_columns
from tabletopic.convert.records import UPSERT, SinkRecords
from tabletopic.observe.metrics import SinkMetrics
from tabletopic.record_faults import bisect
from tabletopic.topic_partition import TopicPartition
from tabletopic.write.arrow_conform import ConformError, conform
from tabletopic.write.column_conversion import JAVA_RULES, ConversionRules
from tabletopic.write.file_writer import FileWriter, WrittenFiles
from tabletopic.write.iceberg_tables import CatalogUnavailable, IcebergTables, TableError, TableHandle
from tabletopic.write.java_errors import JAVA_ERRORS, JavaErrorKind, classify, java_error_message
from tabletopic.write.new_columns import new_column_types
from tabletopic.write.schema_evolution import EvolutionError, plan
from tabletopic.write.schema_evolution import apply as apply_changes
from tabletopic.write.write_result import TableFiles, WriteResult

log = structlog.get_logger(__name__)
_EVOLVE_ATTEMPTS = 5


@dataclass
class _Opening:
    """What :meth:`SinkWriter.open` does for one table, in a thread, and what it found."""

    table: str
    upserts: list[SinkRecords]  # the records that are not deletes: a table is created from the first
    load: bool  # not loaded yet
    read: bool  # what it records is not known yet
    evolve: bool = False
    absent: bool = False  # only deletes go to it, and it does not exist


class SinkWriter:
    """Buffers, writes and answers for one connector's tables.

    Everything runs on the event loop but two kinds of work, each on a pool of its own, so neither waits
    behind the other nor behind anything else the process runs: the catalog calls of :meth:`open`, as
    many at once as tables commit in parallel, and the writes of files, ``parallelism`` at once.
    """

    def __init__(self, tables: IcebergTables, writer: FileWriter, metrics: SinkMetrics,
                 flush_bytes: int, case_insensitive: bool, ledger: PartitionLedger,
                 evolve_schema: bool = False, parallelism: int = 1, open_parallelism: int = 1,
                 rules: ConversionRules = JAVA_RULES) -> None:
        self._tables = tables
        self._writer = writer
        self._metrics = metrics
        self._flush_bytes = flush_bytes
        self._case_insensitive = case_insensitive
        self._ledger = ledger
        self._evolve_schema = evolve_schema
        self._parallelism = parallelism
        self._opens = ThreadPoolExecutor(open_parallelism, thread_name_prefix=f"open-{metrics.connector}")
        self._writes = ThreadPoolExecutor(parallelism, thread_name_prefix=f"write-{metrics.connector}")
        self._rules = rules  # how a value goes into a column of another type
        self.buffers: dict[str, TableBuffer] = {}
        self._pending: dict[str, list[WrittenFiles]] = {}
        self._write_lock = asyncio.Lock()
        self._flushes: set[asyncio.Task[None]] = set()
        # Drained into a write still running: their bytes still count, and their floors may rise.
        self._in_flight: list[Drained] = []
        # Sums over the buffers and the writes in flight, read for every batch taken: summing a thousand
        # tables' buffers per batch made a trickle on a thousand topics more than the event loop could take.
        self._held_bytes = self._held_records = self._flight_bytes = 0
        self._flush_error: BaseException | None = None
        self._resets = 0  # a write that began before a reset is dropped when it ends

    def close(self) -> None:
        """Stop the pools; a write or an open still running ends on its own, and nobody waits for it."""
        self._opens.shutdown(wait=False, cancel_futures=True)
        self._writes.shutdown(wait=False, cancel_futures=True)

    # -- ingest side (event loop, synchronous) ----------------------------------------------------
    async def open(self, changes: dict[str, list[SinkRecords]]) -> frozenset[str]:
        """Do, off the event loop, every catalog call :meth:`prepare` and :meth:`buffer` would make for
        ``changes``: load or create the tables not loaded yet, look up those that only deletes go to,
        evolve the schemas the records need, and read what each new table records. Tables open side by
        side, as many at once as tables commit in parallel. Returns the tables that only deletes go to
        and that do not exist, which :meth:`prepare` then drops without asking the catalog again.

        A table that cannot be opened or evolved is left to :meth:`prepare` and :meth:`buffer`, which
        turn why into the records' failures, or into a system failure.
        """
        jobs: list[_Opening] = []
        for table, records in changes.items():
            upserts = [r for r in records if (r.op_array() == UPSERT).any()]
            opening = _Opening(table, upserts, load=not self._tables.loaded(table),
                               read=not self._ledger.knows(table))
            if not opening.load and self._evolve_schema:
                # Planning reads only the loaded schema: a table whose records fit it costs no thread.
                handle = self._tables.get(table)
                opening.evolve = any(self._changes(handle, r) for r in upserts)
            else:
                opening.evolve = self._evolve_schema and bool(upserts)
            if opening.load or opening.read or opening.evolve:
                jobs.append(opening)
        if not jobs:
            return frozenset()
        loop = asyncio.get_running_loop()

        async def one(opening: _Opening) -> None:
            recorded = await loop.run_in_executor(self._opens, self._open_sync, opening)
            if recorded is not None:
                self._ledger.learn(opening.table, recorded)

        outcomes = await asyncio.gather(*(one(o) for o in jobs), return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        return frozenset(o.table for o in jobs if o.absent)

    def _open_sync(self, opening: _Opening) -> dict[TopicPartition, int] | None:
        """One table's catalog calls, in a thread; what the table records, if it was to be read."""
        table = opening.table
        if opening.load:
            try:
                if opening.upserts:  # as prepare: a table is created from its first rows that are not deletes
                    self._tables.get(table, _column_types(opening.upserts[0]))
                elif table in self._tables.known() or self._tables.exists(table):
                    self._tables.get(table)
                else:
                    opening.absent = True
                    return None
            except TableError:
                return None
        if opening.evolve:
            handle = self._tables.get(table)
            for records in opening.upserts:
                try:
                    handle = self._evolve(handle, records)
                except EvolutionError:
                    break  # prepare plans again, and fails these records with why
        # A thousand new tables' reads, one py4j call each, held the event loop for seconds.
        if opening.read and self._tables.loaded(table):
            with contextlib.suppress(CatalogUnavailable, *JAVA_ERRORS):  # buffer reads it again, and fails
                return self._ledger.read_recorded(table)
        return None

    def prepare(self, table: str, records: SinkRecords,
                absent: Collection[str] = ()) -> tuple[list[SinkRecords], list[Failure]]:
        """Conform rows to ``table``; nothing is buffered yet. After :meth:`open` of these records it
        makes no catalog call (``absent``: what it answered); without it, it makes them itself."""
        ops = records.op_array()
        if not (ops == UPSERT).any() and table not in self._tables.known() and (
                table in absent or not self._tables.exists(table)):
            return [], []  # deleting keys from a table that does not exist yet changes nothing
        handle = self._tables.get(table, None if self._tables.loaded(table) else _column_types(records))
        failures: list[Failure] = []
        if self._evolve_schema and (ops == UPSERT).any():
            try:
                handle = self._evolve(handle, records)
            except EvolutionError as exc:
                return [], [Failure(int(r), str(exc)) for r in records.rows]
        if not handle.keyed:
            return self._conform(handle, records, failures), failures
        parts = []
        upserts = ops == UPSERT
        if upserts.any():
            parts += self._conform(handle, records.take(upserts) if not upserts.all() else records, failures)
        if not upserts.all():
            parts += self._conform_keys(handle, records.take(~upserts), failures)
        parts = [self._without_null_keys(handle, p, failures) for p in parts]
        if len(parts) > 1:  # deletes and upserts were conformed apart; restore offset order
            merged = replace(records, value=pa.concat_tables([p.value for p in parts]),
                             offsets=np.concatenate([p.offsets for p in parts]),
                             timestamps=np.concatenate([p.timestamps for p in parts]),
                             rows=np.concatenate([p.rows for p in parts]),
                             ops=np.concatenate([p.op_array() for p in parts]))
            order = np.argsort(merged.offsets, kind="stable")
            parts = [replace(merged, value=merged.value.take(pa.array(order)), offsets=merged.offsets[order],
                             timestamps=merged.timestamps[order], rows=merged.rows[order], ops=merged.ops[order])]
        return [p for p in parts if len(p)], failures

    def _changes(self, handle: TableHandle, records: SinkRecords) -> bool:
        """Whether ``records`` need the table's schema changed: planned only, no catalog call."""
        try:
            return bool(plan(handle.arrow_schema, records.value.schema, handle.name, self._case_insensitive,
                             handle.id_columns, records.schemaless))
        except EvolutionError:
            return False  # nothing to apply: prepare fails the records with why

    def _evolve(self, handle: TableHandle, records: SinkRecords) -> TableHandle:
        schema = records.value.schema
        for attempt in range(1, _EVOLVE_ATTEMPTS + 1):
            changes = plan(handle.arrow_schema, schema, handle.name, self._case_insensitive, handle.id_columns,
                           records.schemaless)
            if records.schemaless and schema is records.value.schema and any(c.kind == "add" for c in changes):
                # A new column's type: a field of timestamp strings becomes a timestamp column.
                schema = new_column_types(records.value)
                changes = plan(handle.arrow_schema, schema, handle.name, self._case_insensitive,
                               handle.id_columns, True)
            if not changes:
                return handle
            try:
                apply_changes(self._tables.jvm, handle.java, changes)
            except JAVA_ERRORS as exc:
                # Iceberg retries snapshot commits but not a schema update: the coordinator's commit
                # of the round before lands in between often. Plan again on the new metadata.
                if classify(exc) is not JavaErrorKind.CONFLICT or attempt == _EVOLVE_ATTEMPTS:
                    raise CatalogUnavailable(f"cannot evolve table {handle.name}: {java_error_message(exc)}") from exc
                log.info("schema update raced another commit; planning it again", table=handle.name,
                         attempt=attempt)
                handle = self._tables.refresh(handle.name)
                continue
            log.info("evolved table schema", table=handle.name, changes=[str(c) for c in changes])
            return self._tables.refresh(handle.name)
        raise AssertionError("unreachable")

    def _conform_keys(self, handle: TableHandle, records: SinkRecords,
                      failures: list[Failure]) -> list[SinkRecords]:
        """Deletes need only the id columns; the other columns of the table are left null."""
        key_schema = pa.schema([handle.arrow_schema.field(c) for c in handle.id_columns])
        try:
            keys = conform(key_columns(records.value, handle.id_columns), key_schema, handle.name,
                           self._case_insensitive, self._rules)
        except ConformError as exc:
            failures.extend(Failure(int(r), f"delete key: {exc}") for r in records.rows)
            return []
        columns = [keys.column(f.name) if f.name in handle.id_columns else pa.nulls(len(records), f.type)
                   for f in handle.arrow_schema]
        return [records.with_value(pa.Table.from_arrays(columns, schema=handle.arrow_schema))]

    @staticmethod
    def _without_null_keys(handle: TableHandle, records: SinkRecords, failures: list[Failure]) -> SinkRecords:
        null = np.zeros(len(records), dtype=bool)
        for column in handle.id_columns:
            null |= np.asarray(records.value.column(column).is_null().to_numpy(zero_copy_only=False), dtype=bool)
        if not null.any():
            return records
        failures.extend(Failure(int(r), f"id columns {handle.id_columns} must not be null") for r in records.rows[null])
        return records.take(~null)

    def buffer(self, table: str, parts: list[SinkRecords]) -> None:
        buffer = self.buffers.get(table)
        if buffer is None:
            buffer = self.buffers[table] = TableBuffer(table)
        floors = self._ledger.floors(table)
        bytes_before, records_before = buffer.nbytes, buffer.records
        for part in parts:
            buffer.add(part, floors.get((part.topic, part.partition)))
        self._held_bytes += buffer.nbytes - bytes_before
        self._held_records += buffer.records - records_before

    def _recount(self) -> None:
        """The sums over the buffers, after rows left several at once (a round, a commit, a revocation)."""
        self._held_bytes = sum(b.nbytes for b in self.buffers.values())
        self._held_records = sum(b.records for b in self.buffers.values())

    def _conform(self, handle: TableHandle, records: SinkRecords, failures: list[Failure]) -> list[SinkRecords]:
        """The rows in the table's shape; the rows that do not fit fail alone, the others keep their batch."""
        def attempt(lo: int, hi: int) -> SinkRecords:
            part = records.between(lo, hi)
            return part.with_value(conform(part.value, handle.arrow_schema, handle.name, self._case_insensitive,
                                           self._rules))

        return bisect(len(records), attempt, lambda i, exc: failures.append(Failure(int(records.rows[i]), str(exc))),
                      faults=(ConformError,))

    @property
    def buffered_bytes(self) -> int:
        """Rows held in Python: buffered, and drained into a write that has not finished."""
        return self._held_bytes + self._flight_bytes

    @property
    def buffered_records(self) -> int:
        return self._held_records

    def maybe_flush(self, names: Iterable[str]) -> None:
        """Write the rows of ``names`` (the tables just buffered) to files early when a buffer is large
        (they commit in the next round)."""
        for name in names:
            buffer = self.buffers.get(name)
            if buffer is None or self._tables.get(name).keyed:
                # A keyed table's changes are reduced per round (last change per key wins), and
                # deletes in one snapshot do not see rows added in it: its files are all written
                # in the round. tabletopic.buffer.max-bytes still bounds its memory.
                continue
            if buffer.nbytes >= self._flush_bytes and not any(t.get_name() == name for t in self._flushes):
                task = asyncio.get_running_loop().create_task(self._flush(name), name=name)
                self._flushes.add(task)
                task.add_done_callback(self._flushes.discard)

    async def wait_for_flushes(self) -> None:
        if self._flushes:
            await asyncio.gather(*self._flushes, return_exceptions=True)

    async def _flush(self, name: str) -> None:
        async with self._write_lock:
            buffer = self.buffers.get(name)
            drained = buffer.drain(self._ledger.floors(name)) if buffer is not None else None
            if drained is None:
                return
            self._held_bytes -= drained.nbytes
            self._held_records -= drained.records
            resets = self._resets
            try:
                await self._write(drained, resets)
            except Exception as exc:
                if resets != self._resets:
                    return  # those rows were dropped meanwhile, and are read again
                # Those rows left the buffer but reached no file: the next round must not commit
                # positions past them. It fails, and the partitions are read again from the tables.
                log.error("writing files early failed; the next round re-reads from the tables",
                          table=name, error=str(exc))
                self._flush_error = exc

    async def _write(self, drained: Drained, resets: int) -> None:
        await self._write_group([drained], resets)

    async def _write_group(self, group: list[Drained], resets: int) -> None:
        """The rows of ``group``'s tables, in one write: on the driver, or one Spark job
        (see :meth:`FileWriter.write_many`)."""
        items = [(self._tables.get(d.table), d) for d in group]
        self._in_flight.extend(group)
        self._flight_bytes += sum(d.nbytes for d in group)
        try:
            written = await asyncio.get_running_loop().run_in_executor(self._writes, self._writer.write_many, items)
        finally:
            ended = {id(d) for d in group}
            self._in_flight = [d for d in self._in_flight if id(d) not in ended]
            self._flight_bytes -= sum(d.nbytes for d in group)
        if resets != self._resets:
            # Everything uncommitted was dropped while these files were written (a rejected answer,
            # a revocation): their rows are read again, so the files must not reach an answer.
            log.info("dropped files written before a reset", tables=[d.table for d in group],
                     records=sum(w.records for w in written))
            return
        for files in written:
            self._pending.setdefault(files.table, []).append(files)
            self._metrics.write_seconds.labels(table=files.table).observe(files.seconds)
            log.debug("wrote files", table=files.table, files=files.file_count, records=files.records,
                      seconds=round(files.seconds, 3))

    # -- answers --------------------------------------------------------------------------------------
    async def complete_write(self) -> WriteResult:
        """Write everything buffered; return the files and the ranges and floors they cover.

        Raises if any write, early or now, failed or its files cannot be encoded: the rows left the
        buffers but reached no answer, so the caller must read them again.
        """
        async with self._write_lock:
            resets = self._resets
            if self._flush_error is not None:
                error, self._flush_error = self._flush_error, None
                raise RuntimeError(f"an early write failed: {error}") from error
            positions, starts = self._ledger.cut()
            cut_at = {name: dict(self._ledger.floors(name)) for name in self.buffers}
            drained = [d for d in (b.drain(cut_at[n]) for n, b in self.buffers.items()) if d is not None]
            self._recount()
            await self._write_all(drained, resets)
            if resets != self._resets:
                # Dropped while writing (a revocation): claim nothing, the rows are read again.
                return WriteResult({}, {}, {}, {}, {})
            written = {table: self._merged(parts) for table, parts in self._pending.items()}
            written_floors: dict[str, dict[TopicPartition, int] | None] = {}
            for table, parts in self._pending.items():
                same = all(p.floors == parts[0].floors for p in parts)
                written_floors[table] = dict(parts[0].floors) if same else None
            self._pending = {}
            self._release_idle()
            return WriteResult(positions, starts, cut_at, written, written_floors)

    def _release_idle(self) -> None:
        """Once a round: the tables of topics gone quiet are released (see IcebergTables.release_idle)."""
        released = self._tables.release_idle()
        if released:
            log.info("released tables no round used for tabletopic.tables.idle-release-ms", tables=len(released),
                     first=released[:5])
        self._metrics.tables_loaded.set(self._tables.loaded_count())

    async def _write_all(self, drained: list[Drained], resets: int) -> None:
        """Every table's rows, in up to ``parallelism`` writes at once, each taking a share of the
        tables. All of them end before this does; then the first failure, if any, is raised."""
        outcomes = await asyncio.gather(*(self._write_group(group, resets)
                                          for group in shares(drained, self._parallelism)),
                                        return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome

    @staticmethod
    def _merged(parts: list[WrittenFiles]) -> TableFiles:
        """One table's files of this answer, early writes' included."""
        merged: TableFiles | None = None
        for part in parts:
            files = TableFiles(part.files, part.records, part.max_timestamp_ms, part.written_at_ms,
                               part.valid_through_ms)
            merged = files if merged is None else merged.merged(files)
        assert merged is not None
        return merged

    def drop_below(self, raised: Raised, why: str) -> None:
        """Floors rose: buffered rows below them are in their table already."""
        total = 0
        for table, tp, offset in raised:
            buffer = self.buffers.get(table)
            dropped = buffer.drop_below(tp, offset) if buffer is not None else 0
            if dropped:
                log.info(f"dropped buffered rows {why}", table=table, topic=tp[0], partition=tp[1], records=dropped)
            total += dropped
        if total:
            self._recount()

    def release(self, tps: set[TopicPartition]) -> bool:
        """Forget partitions that were revoked: their rows are re-read by their next owner.

        True if everything buffered had to go (files written early may hold rows of the revoked
        partitions and cannot be split), in which case the partitions kept must be read again too.
        """
        gone = set(tps)
        if self._pending or self._flushes or self._in_flight:
            # A round's write under way counts too: its files would reach the answer it is cut for.
            log.info("dropping files written since the last answer: they may hold rows of revoked partitions",
                     tables=sorted(set(self._pending) | {d.table for d in self._in_flight}),
                     early_writes=len(self._flushes))
            self.reset()
            return True
        for buffer in self.buffers.values():
            dropped = buffer.discard(gone)
            if dropped:
                log.info("dropped buffered rows of revoked partitions", table=buffer.table, records=dropped)
        self._recount()
        self._ledger.release(gone)
        return False

    def committed(self, ends: dict[TopicPartition, int], recorded: dict[str, dict[TopicPartition, int]]) -> None:
        """A snapshot now holds everything below ``ends``; ``recorded`` is what each table records.

        Buffered rows below what their table now records were read a second time (after a
        revocation gave the partition back, say) and must not be written again.
        """
        self.drop_below(self._ledger.committed(ends, recorded), "a commit already holds")
        # Files written early since the answer was cut, or being written now, hold only rows past its
        # ends (a write drains under the lock the cut takes): they were cut against the old floors,
        # and are just as valid against the new ones. A write still running when the commit lands
        # was missed here once, and its answer, its floors mixed, was rejected and read again.
        cut_before = [(t, p.floors) for t, parts in self._pending.items() for p in parts]
        for table, floors in cut_before + [(d.table, d.floors) for d in self._in_flight]:
            now = recorded.get(table, {})
            for tp in now.keys() & ends.keys():
                end = ends[tp]
                if now[tp] == end and floors.get(tp, -1) <= end:
                    floors[tp] = end

    def reset(self) -> None:
        """Drop everything not committed (after a failed or fenced commit).

        Positions are decided again from the tables and the ledger's first uncommitted offsets.
        """
        self._resets += 1
        self._flush_error = None
        for buffer in self.buffers.values():
            buffer.clear()
        self.buffers.clear()
        self._recount()
        self._pending.clear()
        self._ledger.reset()


def shares(drained: list[Drained], count: int) -> list[list[Drained]]:
    """``drained`` split into at most ``count`` groups of about equal bytes, the largest placed first."""
    groups: list[list[Drained]] = [[] for _ in range(min(count, len(drained)))]
    loads = [0] * len(groups)
    for item in sorted(drained, key=lambda d: d.nbytes, reverse=True):
        least = loads.index(min(loads))
        groups[least].append(item)
        loads[least] += item.nbytes
    return groups


def _column_types(records: SinkRecords) -> pa.Schema:
    """The types a new table's columns take from ``records`` (see :mod:`tabletopic.write.new_columns`)."""
    return new_column_types(records.value) if records.schemaless else records.value.schema
