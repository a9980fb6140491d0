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
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

import pyarrow as pa
import structlog

from tabletopic.buffer.partition_ledger import PartitionLedger, Raised
from tabletopic.buffer.table_buffer import Drained
from tabletopic.buffer.table_buffers import TableBuffers
from tabletopic.convert.records import SinkRecords
from tabletopic.core.topic_partition import TopicPartition
from tabletopic.observe.metrics import SinkMetrics
from tabletopic.write.file_writer import WrittenFiles
from tabletopic.write.table_handle import TableHandle
from tabletopic.write.write_result import TableFiles, WriteResult

log = structlog.get_logger(__name__)


class WriterTables(Protocol):
    """What the writer needs of the connector's tables (:class:`~tabletopic.write.iceberg_tables.IcebergTables`)."""

    def get(self, name: str, sample: pa.Schema | None = None) -> TableHandle: ...

    def loaded_count(self) -> int: ...

    def release_idle(self) -> list[str]: ...


class FileWrites(Protocol):
    """Writes tables' rows to files (:class:`~tabletopic.write.file_writer.FileWriter`); a write thread's call."""

    def write_many(self, items: list[tuple[TableHandle, Drained]]) -> list[WrittenFiles]: ...


class SinkWriter:
    """Buffers, writes and answers for one connector's tables.

    Everything runs on the event loop but the writes of files, ``parallelism`` at once on a pool of
    their own, so that they wait behind nothing else the process runs. The rows it takes were put in
    their table's shape first (:class:`~tabletopic.write.table_shaper.TableShaper`).
    """

    def __init__(self, tables: WriterTables, writer: FileWrites, metrics: SinkMetrics,
                 flush_bytes: int, ledger: PartitionLedger, parallelism: int = 1) -> None:
        self._tables = tables
        self._writer = writer
        self._metrics = metrics
        self._flush_bytes = flush_bytes
        self._ledger = ledger
        self._parallelism = parallelism
        self._writes = ThreadPoolExecutor(parallelism, thread_name_prefix=f"write-{metrics.connector}")
        self.buffers = TableBuffers()
        self._pending: dict[str, list[WrittenFiles]] = {}
        self._write_lock = asyncio.Lock()
        self._flushes: set[asyncio.Task[None]] = set()
        # Drained into a write still running: their bytes still count, and their floors may rise.
        self._in_flight: list[Drained] = []
        self._flight_bytes = 0  # their bytes, summed as they come and go (read for every batch taken)
        self._flush_error: BaseException | None = None
        self._resets = 0  # a write that began before a reset is dropped when it ends

    def close(self) -> None:
        """Stop the pool; a write still running ends on its own, and nobody waits for it."""
        self._writes.shutdown(wait=False, cancel_futures=True)

    # -- ingest side (event loop, synchronous) ----------------------------------------------------
    def buffer(self, table: str, parts: list[SinkRecords]) -> None:
        self.buffers.add(table, parts, self._ledger.floors(table))

    @property
    def buffered_bytes(self) -> int:
        """Rows held in Python: buffered, and drained into a write that has not finished."""
        return self.buffers.bytes + self._flight_bytes

    @property
    def buffered_records(self) -> int:
        return self.buffers.records

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
            drained = self.buffers.drain(name, self._ledger.floors(name))
            if drained is None:
                return
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
            cut_at = {name: dict(self._ledger.floors(name)) for name in self.buffers.names()}
            drained = self.buffers.drain_all(cut_at)
            await self._write_all(drained, resets)
            if resets != self._resets:
                # Dropped while writing (a revocation): claim nothing, the rows are read again.
                return WriteResult({}, {}, {}, {}, {})
            written = {table: merged(parts) for table, parts in self._pending.items()}
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

    def drop_below(self, raised: Raised, why: str) -> None:
        """Floors rose: buffered rows below them are in their table already."""
        self.buffers.drop_below(raised, why)

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
        self.buffers.discard(gone)
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
        self.buffers.clear()
        self._pending.clear()
        self._ledger.reset()


def merged(parts: list[WrittenFiles]) -> TableFiles:
    """One table's files of an answer, early writes' included."""
    out: TableFiles | None = None
    for part in parts:
        files = TableFiles(part.files, part.records, part.max_timestamp_ms, part.written_at_ms,
                           part.valid_through_ms)
        out = files if out is None else out.merged(files)
    assert out is not None
    return out


def shares(drained: list[Drained], count: int) -> list[list[Drained]]:
    """``drained`` split into at most ``count`` groups of about equal bytes, the largest placed first."""
    groups: list[list[Drained]] = [[] for _ in range(min(count, len(drained)))]
    loads = [0] * len(groups)
    for item in sorted(drained, key=lambda d: d.nbytes, reverse=True):
        least = loads.index(min(loads))
        groups[least].append(item)
        loads[least] += item.nbytes
    return groups
