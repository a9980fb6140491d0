"""The worker: buffers routed rows per table, writes them to files, and answers commit barriers.

It owns, for the partitions assigned to it, the *positions* (the next offset to
process) and the files written but not yet committed.  On :class:`StartCommit`
it drains every buffer into files and answers with :class:`DataComplete`:
those files plus the positions they cover.  Because positions and buffers are
snapshotted together, in one step of the event loop, a commit never claims an
offset whose record is not in its files.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

import numpy as np
import pyarrow as pa
import structlog

from tabletopic.buffer.table_buffer import Drained, TableBuffer, TopicPartition
from tabletopic.commit.events import DataComplete, DataWritten, StartCommit
from tabletopic.convert.converter import Failure
from tabletopic.convert.records import UPSERT, SinkRecords
from tabletopic.ops.metrics import SinkMetrics
from tabletopic.write.arrow_conform import ConformError, conform
from tabletopic.write.file_writer import FileWriter, WrittenFiles
from tabletopic.write.iceberg_tables import IcebergTables, TableHandle
from tabletopic.write.schema_evolution import EvolutionError, plan
from tabletopic.write.schema_evolution import apply as apply_changes

log = structlog.get_logger(__name__)


class Worker:
    def __init__(self, tables: IcebergTables, writer: FileWriter, metrics: SinkMetrics,
                 flush_bytes: int, case_insensitive: bool,
                 floors_for: Callable[[str], dict[TopicPartition, int]], evolve_schema: bool = False) -> None:
        self._tables = tables
        self._writer = writer
        self._metrics = metrics
        self._flush_bytes = flush_bytes
        self._case_insensitive = case_insensitive
        self._floors_for = floors_for  # a table's recorded offsets, read when its buffer is made
        self._evolve_schema = evolve_schema
        self.buffers: dict[str, TableBuffer] = {}
        self.positions: dict[TopicPartition, int] = {}
        # Per partition, the first offset accepted and not yet in a committed snapshot. A failed
        # write must re-read from here: the tables may know nothing of the partition yet.
        self.uncommitted_from: dict[TopicPartition, int] = {}
        self._pending: dict[str, list[WrittenFiles]] = {}
        self._write_lock = asyncio.Lock()
        self._flushes: set[asyncio.Task[None]] = set()
        self._flush_error: BaseException | None = None
        self._resets = 0  # a write that began before a reset is dropped when it ends

    # -- ingest side (event loop, synchronous) ----------------------------------------------------
    def prepare(self, table: str, records: SinkRecords) -> tuple[list[SinkRecords], list[Failure]]:
        """Conform rows to ``table`` (creating it if allowed); nothing is buffered yet."""
        ops = records.op_array()
        if not (ops == UPSERT).any() and table not in self._tables.known() and not self._tables.exists(table):
            return [], []  # deleting keys from a table that does not exist yet changes nothing
        handle = self._tables.get(table, records.value.schema)
        failures: list[Failure] = []
        if self._evolve_schema and (ops == UPSERT).any():
            try:
                handle = self._evolve(handle, records.value.schema)
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
            merged = SinkRecords(records.topic, records.partition,
                                 pa.concat_tables([p.value for p in parts]),
                                 np.concatenate([p.offsets for p in parts]),
                                 np.concatenate([p.timestamps for p in parts]),
                                 np.concatenate([p.rows for p in parts]),
                                 np.concatenate([p.op_array() for p in parts]))
            order = np.argsort(merged.offsets, kind="stable")
            parts = [SinkRecords(merged.topic, merged.partition, merged.value.take(pa.array(order)),
                                 merged.offsets[order], merged.timestamps[order], merged.rows[order],
                                 merged.ops[order])]
        return [p for p in parts if len(p)], failures

    def _evolve(self, handle: TableHandle, schema: pa.Schema) -> TableHandle:
        changes = plan(handle.arrow_schema, schema, handle.name, self._case_insensitive)
        if not changes:
            return handle
        apply_changes(self._tables.jvm, handle.java, changes)
        log.info("evolved table schema", table=handle.name, changes=[str(c) for c in changes])
        return self._tables.refresh(handle.name)

    def _conform_keys(self, handle: TableHandle, records: SinkRecords,
                      failures: list[Failure]) -> list[SinkRecords]:
        """Deletes need only the id columns; the other columns of the table are left null."""
        key_schema = pa.schema([handle.arrow_schema.field(c) for c in handle.id_columns])
        try:
            keys = conform(records.value, key_schema, handle.name, self._case_insensitive)
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
            buffer = self.buffers[table] = TableBuffer(table, floor=dict(self._floors_for(table)))
        for part in parts:
            buffer.add(part)

    def _conform(self, handle: TableHandle, records: SinkRecords, failures: list[Failure]) -> list[SinkRecords]:
        try:
            return [records.with_value(conform(records.value, handle.arrow_schema, handle.name,
                                               self._case_insensitive))]
        except ConformError as exc:
            if len(records) == 1:
                failures.append(Failure(int(records.rows[0]), str(exc)))
                return []
        # Halve until the rows that do not fit are found; the others keep their batch.
        mask = np.arange(len(records)) < len(records) // 2
        return self._conform(handle, records.take(mask), failures) + \
            self._conform(handle, records.take(~mask), failures)

    def advance(self, tp: TopicPartition, first_offset: int, next_offset: int) -> None:
        self.uncommitted_from.setdefault(tp, first_offset)
        if next_offset > self.positions.get(tp, -1):
            self.positions[tp] = next_offset

    @property
    def buffered_bytes(self) -> int:
        return sum(b.nbytes for b in self.buffers.values())

    @property
    def buffered_records(self) -> int:
        return sum(b.records for b in self.buffers.values())

    def maybe_flush(self) -> None:
        """Write a table's rows to files early when its buffer is large (they commit at the barrier)."""
        for name, buffer in self.buffers.items():
            if self._tables.get(name).keyed:
                # A keyed table's changes are reduced per barrier (last change per key wins), and
                # deletes in one snapshot do not see rows added in it: its files are all written
                # at the barrier. tabletopic.buffer.max-bytes still bounds its memory.
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
            drained = buffer.drain() if buffer is not None else None
            if drained is None:
                return
            resets = self._resets
            try:
                await self._write(drained, resets)
            except Exception as exc:
                if resets != self._resets:
                    return  # those rows were dropped meanwhile, and are read again
                # Those rows left the buffer but reached no file: the next barrier must not commit
                # positions past them. It fails, and the partitions are read again from the tables.
                log.error("writing files early failed; the next barrier re-reads from the tables",
                          table=name, error=str(exc))
                self._flush_error = exc

    async def _write(self, drained: Drained, resets: int) -> None:
        handle = self._tables.get(drained.table)
        written = await asyncio.to_thread(self._writer.write, handle, drained)
        if resets != self._resets:
            # Everything uncommitted was dropped while these files were written (a rejected answer,
            # a revocation): their rows are read again, so the files must not reach an answer.
            log.info("dropped files written before a reset", table=drained.table, records=written.records)
            return
        self._pending.setdefault(drained.table, []).append(written)
        self._metrics.write_seconds.labels(table=drained.table).observe(written.seconds)
        log.debug("wrote files", table=drained.table, files=written.file_count, records=written.records,
                  seconds=round(written.seconds, 3))

    # -- barrier side ---------------------------------------------------------------------------
    async def start_commit(self, event: StartCommit) -> DataComplete:
        """Write everything buffered and answer with the files and the positions they cover."""
        async with self._write_lock:
            resets = self._resets
            if self._flush_error is not None:
                error, self._flush_error = self._flush_error, None
                raise RuntimeError(f"an early write failed: {error}") from error
            positions = dict(self.positions)
            starts = {tp: self.uncommitted_from.get(tp, end) for tp, end in positions.items()}
            cut_at = {name: dict(buffer.floor) for name, buffer in self.buffers.items()}
            drained = [d for d in (b.drain() for b in self.buffers.values()) if d is not None]
            for item in drained:
                await self._write(item, resets)
            if resets != self._resets:
                # Dropped while writing (a revocation): claim nothing, the rows are read again.
                return DataComplete(event.commit_id, {}, [])
            written = []
            for table, parts in self._pending.items():
                files = parts[0].files
                for extra in parts[1:]:
                    files = self._writer.jvm.tabletopic.SinkWriter.concat(files, extra.files)
                newest = [p.max_timestamp_ms for p in parts if p.max_timestamp_ms is not None]
                floors = parts[0].floors if all(p.floors == parts[0].floors for p in parts) else None
                written.append(DataWritten(event.commit_id, table, files, sum(p.records for p in parts),
                                           sum(p.file_count for p in parts), max(newest) if newest else None,
                                           floors))
            self._pending = {}
            return DataComplete(event.commit_id, positions, written, starts, cut_at)

    def set_floors(self, floors: dict[str, dict[TopicPartition, int]], tps: Iterable[TopicPartition]) -> None:
        """After an assignment: what each table already holds of ``tps``; buffered rows below go."""
        for tp in tps:
            for name, buffer in self.buffers.items():
                offset = floors.get(name, {}).get(tp)
                if offset is None:
                    buffer.floor.pop(tp, None)
                    continue
                buffer.floor[tp] = offset
                dropped = buffer.drop_below(tp, offset)
                if dropped:
                    log.info("dropped buffered rows the table already has", table=name, topic=tp[0],
                             partition=tp[1], records=dropped)

    def release(self, tps: Iterable[TopicPartition]) -> bool:
        """Forget partitions that were revoked: their rows are re-read by their next owner.

        ``uncommitted_from`` stays: if a partition comes back, it is read again from there, since
        the rows dropped here reached no table. True if everything buffered had to go (files
        written early may hold rows of the revoked partitions and cannot be split), in which case
        the partitions kept must be read again too.
        """
        gone = set(tps)
        if self._pending or self._flushes:
            log.info("dropping files written early: they may hold rows of revoked partitions",
                     tables=sorted(self._pending), writing=len(self._flushes))
            self.reset()
            return True
        for buffer in self.buffers.values():
            dropped = buffer.discard(gone)
            if dropped:
                log.info("dropped buffered rows of revoked partitions", table=buffer.table, records=dropped)
        for tp in gone:
            self.positions.pop(tp, None)
        return False

    def committed(self, positions: dict[TopicPartition, int], tables: dict[str, dict[TopicPartition, int]]) -> None:
        """A snapshot now holds everything below ``positions``; ``tables`` is what each table records.

        Buffered rows below what their table now records were read a second time (after a
        revocation gave the partition back, say) and must not be written again: they go, and the
        buffer's floors move up, so that answers say what their rows were cut against.
        """
        for tp, offset in positions.items():
            if tp in self.uncommitted_from:
                self.uncommitted_from[tp] = max(self.uncommitted_from[tp], offset)
        for buffer in self.buffers.values():
            recorded = tables.get(buffer.table, {})
            for tp in positions:
                if tp not in recorded:
                    continue
                buffer.floor[tp] = recorded[tp]
                dropped = buffer.drop_below(tp, recorded[tp])
                if dropped:
                    log.info("dropped buffered rows a commit already holds", table=buffer.table, topic=tp[0],
                             partition=tp[1], records=dropped)
        # Files written early since the answer's snapshot hold only rows past its ends: they were cut
        # against the old floors, and are just as valid against the new ones.
        for table, parts in self._pending.items():
            recorded = tables.get(table, {})
            for part in parts:
                for tp, end in positions.items():
                    if recorded.get(tp) == end and part.floors.get(tp, -1) <= end:
                        part.floors[tp] = end

    def reset(self) -> None:
        """Drop everything not committed (after a failed or fenced commit).

        Positions are decided again from the tables and ``uncommitted_from``, which stays.
        """
        self._resets += 1
        self._flush_error = None
        for buffer in self.buffers.values():
            buffer.clear()
        self.buffers.clear()
        self._pending.clear()
        self.positions.clear()
