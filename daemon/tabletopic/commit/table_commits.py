"""The coordinator's tables: what each records for this connector, and one commit per table per round.

It reads a table's offsets when the table is first judged, then tracks them
through its own commits; :meth:`reset` forgets them when another coordinator may
have committed.  A round's tables are committed in parallel, up to
``iceberg.control.commit.threads``, each in one snapshot holding its files and
the round's offsets of the partitions that feed it (see
:mod:`tabletopic.write.table_committer` and :mod:`tabletopic.route.table_feeds`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import pyarrow as pa
import structlog

from tabletopic.commit.commit_state import clean_after
from tabletopic.commit.events import Answer
from tabletopic.core.topic_partition import TopicPartition
from tabletopic.observe.metrics import SinkMetrics
from tabletopic.offsets.source_offsets import Recorded
from tabletopic.offsets.table_scope import TableScope, unrecorded
from tabletopic.route.table_feeds import TableFeeds
from tabletopic.write.java_errors import JAVA_ERRORS, classify, describe, java_error_message
from tabletopic.write.table_committer import CommitFailed, CommitFenced, CommitResult
from tabletopic.write.table_handle import CATALOG_ERRORS, TableError, TableHandle
from tabletopic.write.write_result import TableFiles

log = structlog.get_logger(__name__)
_T = TypeVar("_T")


@dataclass
class RoundOutcome:
    snapshots: dict[str, int] = field(default_factory=dict)  # table -> snapshot id
    failed: dict[str, CommitFailed | CommitFenced] = field(default_factory=dict)  # table -> why
    fenced: bool = False
    # What every known table records once the round landed (only then): the verdict's offsets.
    recorded: dict[str, dict[TopicPartition, int]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.fenced and not self.failed


class CommitTables(Protocol):
    """What the commits need of the connector's tables (:class:`~tabletopic.write.iceberg_tables.IcebergTables`).
    Called on the commit and read pools."""

    def known(self) -> list[str]: ...

    def get(self, name: str, sample: pa.Schema | None = None) -> TableHandle: ...

    def recorded(self, name: str, group_id: str) -> Recorded: ...

    def java_tables(self) -> Any: ...


class Committer(Protocol):
    """One table's commit, and the check of an answer's files
    (:class:`~tabletopic.write.table_committer.TableCommitter`)."""

    def commit(self, handle: TableHandle, files: list[dict[str, Any]] | None, positions: dict[TopicPartition, int],
               expected: dict[TopicPartition, int], max_timestamp_ms: int | None, epoch: int = -1,
               round_start: dict[TopicPartition, int] | None = None, scope: TableScope | None = None,
               task: str = "", valid_through_ms: int | None = None) -> CommitResult: ...

    def invalid_files(self, java_tables: Any, files: dict[str, list[dict[str, Any]]],
                      load: Callable[[str], TableHandle]) -> str | None: ...


class TableCommits:
    """What the coordinator commits and reads of its tables. Runs on the event loop; the commits run on
    its commit pool (one table a thread) and the reads on its read pool (:meth:`off_loop`), never both
    on one table's state at once: the coordinator's round lock keeps them apart.
    """

    def __init__(self, tables: CommitTables, committer: Committer, metrics: SinkMetrics, group_id: str,
                 static_tables: list[str], refresh_rounds: int, timeout_s: float, threads: int,
                 feeds: TableFeeds) -> None:
        self._log = log.bind(connector=metrics.connector)
        self._tables = tables
        self._committer = committer
        self._metrics = metrics
        self._group_id = group_id
        self._static = static_tables
        self._feeds = feeds
        self._refresh_rounds = refresh_rounds
        self._timeout_s = timeout_s
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=f"commit-{metrics.connector}")
        # What the tables record, and whether an answer's files are theirs: one round's reads at a time.
        self._reads = ThreadPoolExecutor(max_workers=2, thread_name_prefix=f"read-{metrics.connector}")
        self._offsets: dict[str, dict[TopicPartition, int]] = {}
        # Per table, offsets past what it records up to which this coordinator's committed rounds hold
        # no rows for it (see commit_state.judge): known only from those rounds, forgotten with _offsets.
        self._clean: dict[str, dict[TopicPartition, int]] = {}
        self._last_commit: dict[str, int] = {}
        self._rounds = 0

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._reads.shutdown(wait=False, cancel_futures=True)

    async def off_loop(self, call: Callable[..., _T], *args: Any) -> _T:
        """``call(*args)``, a read of the tables, on a pool of its own: the coordinator's reads wait
        neither behind commits that hang on a catalog nor behind writes or another connector's work."""
        return await asyncio.get_running_loop().run_in_executor(self._reads, call, *args)

    # -- what the tables record -------------------------------------------------------------------
    def recorded(self, names: Iterable[str] = ()) -> dict[str, dict[TopicPartition, int]]:
        """Every table this coordinator knows of (and ``names``), with the offsets it records now."""
        for table in {*names, *self._tables.known(), *self._static}:
            if table not in self._offsets:
                try:
                    self._offsets[table] = self._tables.recorded(table, self._group_id).offsets
                except TableError:  # a table that does not exist yet records nothing
                    continue
                except CATALOG_ERRORS as exc:
                    # Read again next time. Judged as recording nothing meanwhile, which is safe: a commit to
                    # it checks the offsets it expects against the table itself, and is fenced if they differ.
                    self._log.warning("cannot read what a table records; read again next round", table=table,
                                      error=describe(exc))
                    continue
                self._last_commit.setdefault(table, self._rounds)
        return {t: dict(o) for t, o in self._offsets.items()}

    def reset(self) -> None:
        """Forget what the tables record: another coordinator may have committed since."""
        self._offsets.clear()
        self._clean.clear()

    def clean(self) -> dict[str, dict[TopicPartition, int]]:
        return {t: dict(o) for t, o in self._clean.items()}

    def invalid_files(self, answer: Answer) -> str | None:
        """Why an answer's files cannot be added to their tables, or None.

        The loaded tables are checked in one py4j call; a table released meanwhile is loaded and
        checked on its own.
        """
        return self._committer.invalid_files(self._tables.java_tables(),
                                             {t: f.files for t, f in answer.tables.items()}, self._tables.get)

    # -- committing -------------------------------------------------------------------------------
    async def commit(self, positions: dict[TopicPartition, int], starts: dict[TopicPartition, int],
                     by_table: dict[str, TableFiles], started: float, epoch: int, task: str = "") -> RoundOutcome:
        """Commit each table that has files, or whose offsets lag behind for too many rounds; ``task`` names the
        committing member in the snapshots (``kafka.connect.task-id``).

        Each records ``starts``, where the round began reading: a crash between two of the round's
        snapshots leaves the tables not yet committed to learn from it where their rows began.
        """
        self._rounds += 1
        outcome = RoundOutcome()
        if not positions and not by_table:
            outcome.recorded = await self.off_loop(self.recorded)
            return outcome
        targets = set(by_table)
        for table, offsets in self._offsets.items():
            behind = any(offsets[tp] < positions[tp] for tp in offsets.keys() & positions.keys())
            if behind and self._rounds - self._last_commit.get(table, 0) >= self._refresh_rounds:
                targets.add(table)
        fresh = unrecorded(starts, self._offsets) if self._feeds.starts_of_unrecorded else frozenset()
        if self._feeds.per_table:
            # Each table is handed its own partitions: with a thousand tables, filtering every partition of
            # the connector for each was a million look-ups a round.
            own_positions, own_starts = self._feeds.split(positions), self._feeds.split(starts)
            fresh_starts = {tp: starts[tp] for tp in fresh}
            share = {t: (own_positions.get(t, {}), {**own_starts.get(t, {}), **fresh_starts}) for t in targets}
        else:
            share = {t: (positions, starts) for t in targets}
        results = await asyncio.gather(*(self._commit_table(t, by_table.get(t), *share[t], started, epoch,
                                                            self._scope(t, fresh), task)
                                         for t in sorted(targets)))
        for table, result in zip(sorted(targets), results, strict=True):
            if isinstance(result, CommitResult):
                outcome.snapshots[table] = result.snapshot_id
            else:
                outcome.failed[table] = result
                outcome.fenced |= isinstance(result, CommitFenced)
        if not outcome.ok:
            self.reset()
            return outcome
        outcome.recorded = await self.off_loop(self.recorded)
        self._clean = clean_after(starts, positions, by_table, outcome.recorded, self._clean)
        return outcome

    def _scope(self, table: str, fresh: frozenset[TopicPartition]) -> TableScope | None:
        """What ``table``'s snapshot records (see :mod:`tabletopic.offsets.table_scope`); None: everything."""
        if not self._feeds.per_table:
            return None
        return TableScope(lambda tp: self._feeds.feeds(table, tp), fresh)

    async def _commit_table(self, table: str, files: TableFiles | None, positions: dict[TopicPartition, int],
                            starts: dict[TopicPartition, int], started: float, epoch: int,
                            scope: TableScope | None, task: str) -> CommitResult | CommitFenced | CommitFailed:
        labels = {"table": table}
        expected = self._offsets.get(table, {})
        future = asyncio.get_running_loop().run_in_executor(self._pool, self._commit_sync, table, files,
                                                            dict(positions), dict(starts), dict(expected), epoch,
                                                            scope, task)
        try:
            try:
                result = await asyncio.wait_for(asyncio.shield(future), self._timeout_s)
            except asyncio.CancelledError:
                # The commit runs on in its thread whatever happens here: record what it did before
                # giving up, or the next round would take this sink's own commit for another writer's.
                with contextlib.suppress(Exception):
                    self._record(table, files, await future, started)
                raise
        except asyncio.TimeoutError:
            # It may still land; the next round's offset check sees it and fences.
            self._metrics.commit_failures.labels(**labels).inc()
            self._log.error("commit timed out; iceberg.control.commit.timeout-ms may be too low", table=table,
                            timeout_s=self._timeout_s)
            return CommitFailed(f"commit to {table} timed out after {self._timeout_s:.0f}s")
        except (CommitFenced, CommitFailed) as exc:
            self._metrics.commit_failures.labels(**labels).inc()
            self._log.error("commit refused: the round's answers are rejected and read again"
                            if isinstance(exc, CommitFenced) else "commit failed; the round's answers are read again",
                            table=table, error=str(exc))
            return exc
        except Exception as exc:  # the catalog or the JVM: never a reason to lose the round's records
            self._metrics.commit_failures.labels(**labels).inc()
            why = describe(exc)
            self._log.error("commit failed; the round's answers are read again", table=table, error=why)
            return CommitFailed(f"commit to {table} failed: {why}", classify(exc))
        elapsed = self._record(table, files, result, started)
        self._log.info("committed", table=table, snapshot_id=result.snapshot_id, data_files=result.data_files,
                       records=result.records, equality_deletes=result.equality_deletes,
                       position_deletes=result.position_deletes, positions_sought=result.positions_sought,
                       commit_seconds=round(result.seconds, 3),
                       round_seconds=round(elapsed, 3), epoch=epoch)
        return result

    def _commit_sync(self, table: str, files: TableFiles | None, positions: dict[TopicPartition, int],
                     starts: dict[TopicPartition, int], expected: dict[TopicPartition, int],
                     epoch: int, scope: TableScope | None, task: str) -> CommitResult:
        with self._metrics.timed("commit"):
            return self._commit_table_now(table, files, positions, starts, expected, epoch, scope, task)

    def _commit_table_now(self, table: str, files: TableFiles | None, positions: dict[TopicPartition, int],
                          starts: dict[TopicPartition, int], expected: dict[TopicPartition, int],
                          epoch: int, scope: TableScope | None, task: str) -> CommitResult:
        try:
            handle = self._tables.get(table)
        except JAVA_ERRORS as exc:
            raise CommitFailed(f"cannot load {table}: {java_error_message(exc)}", classify(exc)) from exc
        return self._committer.commit(handle, files.files if files is not None else None, positions, expected,
                                      files.max_timestamp_ms if files else None, epoch, starts, scope, task,
                                      files.valid_through_ms if files else None)

    def _record(self, table: str, files: TableFiles | None, result: CommitResult, started: float) -> float:
        """Take a landed commit into account; return the seconds since its round began."""
        labels = {"table": table}
        elapsed = time.monotonic() - started
        self._offsets[table] = result.offsets
        self._last_commit[table] = self._rounds
        self._metrics.commit_seconds.labels(**labels).observe(elapsed)
        self._metrics.commits.labels(**labels).inc()
        self._metrics.records_written.labels(**labels).inc(result.records)
        self._metrics.committed_deletes.labels(kind="equality", **labels).inc(result.equality_deletes)
        self._metrics.committed_deletes.labels(kind="position", **labels).inc(result.position_deletes)
        self._metrics.last_commit.labels(**labels).set(time.time())
        self._metrics.table_data_files.labels(**labels).set(result.totals["total-data-files"])
        self._metrics.table_delete_files.labels(**labels).set(result.totals["total-delete-files"])
        self._metrics.table_bytes.labels(**labels).set(result.totals["total-files-size"])
        if files is not None and files.max_timestamp_ms is not None:
            self._metrics.note_committed_timestamp(table, files.max_timestamp_ms)
        return elapsed
