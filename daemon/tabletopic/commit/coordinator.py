"""The coordinator: turns a barrier's DataComplete into one snapshot per table.

It remembers what offsets each table records (read when the table is first
used, then updated by each commit) and hands those to the committer as the
expected state, which is what fences a writer that lost its partitions.
Files of a table whose commit failed are carried to the next barrier, never
dropped; a fenced commit drops everything instead, because the tables say
another writer has those records.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import structlog

from tabletopic.commit.events import CommitComplete, DataComplete, DataWritten, TopicPartition
from tabletopic.commit.source_offsets import read_offsets
from tabletopic.commit.table_committer import CommitFailed, CommitFenced, CommitResult, TableCommitter
from tabletopic.ops.metrics import SinkMetrics
from tabletopic.write.iceberg_tables import IcebergTables

log = structlog.get_logger(__name__)


class Coordinator:
    def __init__(self, tables: IcebergTables, committer: TableCommitter, metrics: SinkMetrics,
                 group_id: str, refresh_barriers: int, timeout_s: float) -> None:
        self._log = log.bind(connector=metrics.connector)
        self._tables = tables
        self._committer = committer
        self._metrics = metrics
        self._group_id = group_id
        self._refresh_barriers = refresh_barriers
        self._timeout_s = timeout_s
        self.table_offsets: dict[str, dict[TopicPartition, int]] = {}
        self._carry: dict[str, DataWritten] = {}
        self._last_commit: dict[str, int] = {}
        self._barrier = 0
        self.epoch = -1  # the consumer group generation this member coordinates for; -1: not coordinating

    def recorded_offsets(self, table: str) -> dict[TopicPartition, int]:
        """What ``table`` records for this connector, read once and then tracked."""
        if table not in self.table_offsets:
            handle = self._tables.get(table)
            handle.java.refresh()
            self.table_offsets[table] = read_offsets(handle.java, handle.branch, self._group_id)
            self._last_commit.setdefault(table, self._barrier)
        return self.table_offsets[table]

    def reread(self, tables: list[str]) -> dict[str, dict[TopicPartition, int]]:
        """Read the offsets of ``tables`` afresh (on assignment, and after a fenced commit)."""
        for table in tables:
            self.table_offsets.pop(table, None)
        return {t: self.recorded_offsets(t) for t in tables}

    def reset(self) -> None:
        self.table_offsets.clear()
        self._carry.clear()

    def adopt(self, table: str, offsets: dict[TopicPartition, int]) -> None:
        """What the coordinator says ``table`` records now (it may be another daemon)."""
        if table in self.table_offsets or offsets:
            self.table_offsets[table] = dict(offsets)

    async def commit(self, complete: DataComplete, barrier_started: float) -> CommitComplete:
        self._barrier += 1
        by_table: dict[str, DataWritten] = {}
        for written in complete.written:
            by_table[written.table] = self._merge(self._carry.pop(written.table, None), written)
        for table, carried in list(self._carry.items()):
            by_table[table] = carried
            del self._carry[table]
        positions = complete.positions
        targets = dict.fromkeys(by_table)
        for table, offsets in self.table_offsets.items():
            behind = any(tp in offsets and offsets[tp] < pos for tp, pos in positions.items())
            if behind and table not in targets and \
                    self._barrier - self._last_commit.get(table, 0) >= self._refresh_barriers:
                targets[table] = None
        result = CommitComplete(complete.commit_id, {}, {})
        if not positions and not by_table:
            return result
        for table in targets:
            written = by_table.get(table)
            outcome = await self._commit_table(table, written, positions, barrier_started)
            if isinstance(outcome, CommitResult):
                result.snapshots[table] = outcome.snapshot_id
            elif isinstance(outcome, CommitFenced):
                result.fenced = True
                result.failed[table] = str(outcome)
                break
            else:
                result.failed[table] = str(outcome)
                if written is not None:
                    self._carry[table] = written
        if result.fenced:
            self.reset()
        return result

    def _record(self, table: str, written: DataWritten | None, outcome: CommitResult,
                barrier_started: float) -> float:
        """Take a landed commit into account; return the seconds since its barrier began."""
        labels = {"table": table}
        elapsed = time.monotonic() - barrier_started
        self._metrics.commit_seconds.labels(**labels).observe(elapsed)
        self.table_offsets[table] = outcome.offsets
        self._last_commit[table] = self._barrier
        self._metrics.commits.labels(**labels).inc()
        self._metrics.records_written.labels(**labels).inc(outcome.records)
        self._metrics.last_commit.labels(**labels).set(time.time())
        if written is not None and written.max_timestamp_ms is not None:
            self._metrics.note_committed_timestamp(table, written.max_timestamp_ms)
        return elapsed

    def _merge(self, old: DataWritten | None, new: DataWritten) -> DataWritten:
        if old is None:
            return new
        jvm = self._tables.jvm
        stamps = [t for t in (old.max_timestamp_ms, new.max_timestamp_ms) if t is not None]
        return DataWritten(new.commit_id, new.table, jvm.tabletopic.SinkWriter.concat(old.files, new.files),
                           old.records + new.records, old.file_count + new.file_count,
                           max(stamps) if stamps else None)

    async def _commit_table(self, table: str, written: DataWritten | None, positions: dict[TopicPartition, int],
                            barrier_started: float) -> CommitResult | CommitFenced | CommitFailed:
        labels = {"table": table}
        try:
            expected = self.recorded_offsets(table)
            handle = self._tables.get(table)
        except Exception as exc:  # catalog trouble reading the table: retried next barrier
            self._metrics.commit_failures.labels(**labels).inc()
            self._log.error("cannot read table before commit; will retry at the next barrier", table=table,
                            error=str(exc))
            return CommitFailed(str(exc))
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(None, self._committer.commit, handle, written.files if written else None,
                                      dict(positions), dict(expected),
                                      written.max_timestamp_ms if written else None, self.epoch)
        try:
            try:
                outcome = await asyncio.wait_for(asyncio.shield(future), self._timeout_s)
            except asyncio.CancelledError:
                # The commit runs on in its thread whatever happens here: record what it did before
                # giving up, or the next barrier would take this sink's own commit for another writer's.
                with contextlib.suppress(Exception):
                    self._record(table, written, await future, barrier_started)
                raise
        except asyncio.TimeoutError:
            # The commit may still land; the next barrier's offset check will see it and fence.
            self._metrics.commit_failures.labels(**labels).inc()
            self._log.error("commit timed out; iceberg.control.commit.timeout-ms may be too low", table=table,
                            timeout_s=self._timeout_s)
            return CommitFailed(f"commit to {table} timed out after {self._timeout_s:.0f}s")
        except CommitFenced as exc:
            self._metrics.commit_failures.labels(**labels).inc()
            self._log.error("commit fenced: the table moved on; re-reading positions from the tables",
                            table=table, error=str(exc))
            return exc
        except CommitFailed as exc:
            self._metrics.commit_failures.labels(**labels).inc()
            self._log.error("commit failed; the files are kept and retried at the next barrier", table=table,
                            error=str(exc))
            return exc
        elapsed = self._record(table, written, outcome, barrier_started)
        self._log.info("committed", table=table, snapshot_id=outcome.snapshot_id, data_files=outcome.data_files,
                       records=outcome.records, commit_seconds=round(outcome.seconds, 3),
                       barrier_seconds=round(elapsed, 3))
        return outcome
