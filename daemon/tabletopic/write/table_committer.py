"""Commit one table: its pending files and the new source offsets, in one snapshot, or not at all.

Before committing, the committer re-reads the offsets the table holds and
compares them with the ones this sink last saw.  If any of its partitions moved
(another daemon, a zombie, an operator) the commit is *fenced*: nothing is
written, and the sink re-reads its positions from the tables.  The RowDelta is
validated against the snapshot those offsets came from, and Iceberg re-runs
that validation on each of its internal retries, so a concurrent commit can
never slip in between the check and the commit.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

from tabletopic.core.topic_partition import TopicPartition
from tabletopic.offsets.source_offsets import (
    COMMIT_ID_KEY,
    CONNECTOR_KEY,
    TASK_ID_KEY,
    VALID_THROUGH_KEY,
    VTTS_KEY,
    encode,
    epoch_key,
    java_instant,
    offsets_key,
    property_key,
    property_value,
    round_start_key,
)
from tabletopic.offsets.table_scope import TableScope
from tabletopic.write.java_errors import JAVA_ERRORS, JavaErrorKind, classify, java_error_message
from tabletopic.write.java_snapshots import read_refreshed
from tabletopic.write.spark_session import SparkRuntime
from tabletopic.write.table_handle import TableHandle

_VALIDATION_RETRIES = 3
_TOTALS = ("total-data-files", "total-delete-files", "total-files-size")


class CommitFenced(RuntimeError):
    """The table's offsets for our partitions moved since we read them; the batch must be dropped."""


class CommitFailed(RuntimeError):
    """The commit did not happen; it is retried at the next round. ``kind`` is how Iceberg answered:
    a refusal that comes back round after round fails the connector (:mod:`.repeated_refusals`)."""

    def __init__(self, why: str, kind: JavaErrorKind = JavaErrorKind.OTHER) -> None:
        super().__init__(why)
        self.kind = kind


@dataclass
class CommitResult:
    table: str
    snapshot_id: int
    offsets: dict[TopicPartition, int]
    data_files: int
    records: int
    seconds: float
    totals: dict[str, int]  # the new snapshot's total-* summary figures (data files, delete files, bytes)
    equality_deletes: int = 0  # equality delete records the snapshot added: it could not find their rows
    position_deletes: int = 0  # position delete records it added in their place, merged ones included
    # Whether it looked for its deleted rows' positions: not while the connector compacts the table,
    # nor with conversion elsewhere than at commit.
    positions_sought: bool = False


class TableCommitter:
    """One table's commit through the Java writer: its offsets checked, its files and summary committed.
    Called from the commit pool's threads, several tables at once: it keeps no state between commits."""

    def __init__(self, spark: SparkRuntime, connector: str, group_id: str,
                 on_retry: Callable[[str], None] | None = None,
                 positions: Callable[[str], AbstractContextManager[int]] = lambda table: nullcontext(0),
                 snapshot_bound: Callable[[str], int] = lambda table: 0) -> None:
        """``positions(table)`` is held around each commit of ``table``, and gives the most rows the commit
        may read to carry position deletes in place of its equality deletes (0: never);
        see :class:`tabletopic.maintain.commit_positions.CommitPositions`. ``snapshot_bound(table)`` is the
        most snapshots a commit leaves before expiring the oldest (0: none), see
        ``tabletopic.maintenance.snapshots.max-count``."""
        self._spark = spark
        self._positions = positions
        self._snapshot_bound = snapshot_bound
        self._connector = connector
        self._group_id = group_id
        self._on_retry = on_retry

    def _writer(self) -> Any:
        """tabletopic's SinkWriter class and its methods, each looked up once through py4j."""
        return self._spark.java_class("tabletopic.SinkWriter")

    def _heads(self) -> Any:
        """tabletopic's TableHeads class: a table's head and summaries, each in one py4j call."""
        return self._spark.java_class("tabletopic.TableHeads")

    def _empty_list(self) -> Any:
        return self._spark.java_class("java.util.ArrayList")()

    def invalid_files(self, java_tables: Any, files: dict[str, list[dict[str, Any]]],
                      load: Callable[[str], TableHandle]) -> str | None:
        """Why ``files`` (an answer's content files by table) cannot be added to their tables, or None.

        The loaded tables (``java_tables``, the Java map of them) are checked in one py4j call; a table
        released meanwhile is loaded with ``load`` and checked on its own.
        """
        helper = self._spark.java_class("tabletopic.ContentFiles")
        try:
            report = json.loads(helper.invalidFiles(java_tables, json.dumps(files)))
        except JAVA_ERRORS as exc:
            return f"files cannot be read: {java_error_message(exc)}"
        if report["invalid"] is not None:
            return str(report["invalid"])
        for table in report["unchecked"]:
            try:
                helper.filesFromJson(load(table).java, json.dumps(files[table]))
            except JAVA_ERRORS as exc:
                return f"files for {table} cannot be read: {java_error_message(exc)}"
            except Exception as exc:  # the table cannot be loaded: a system failure, judged as one
                return f"table {table} cannot be loaded: {exc}"
        return None

    def commit(
        self,
        handle: TableHandle,
        files: list[dict[str, Any]] | None,
        positions: dict[TopicPartition, int],
        expected: dict[TopicPartition, int],
        max_timestamp_ms: int | None,
        epoch: int = -1,
        round_start: dict[TopicPartition, int] | None = None,
        scope: TableScope | None = None,
        task: str = "",
        valid_through_ms: int | None = None,
    ) -> CommitResult:
        """Commit ``files`` (Iceberg's content files as JSON, as answers carry them; None for an offsets-only
        snapshot) with ``positions``. The JVM reads them in the commit's own call: with a table per topic,
        one more py4j call a commit was a thousand more a round, each waiting for the interpreter's lock.

        ``expected`` holds what this sink believes the table records for the partitions in
        ``positions``; a partition absent from it must be absent from the table too.
        ``round_start`` says where the round began reading each partition (see
        :mod:`tabletopic.offsets.source_offsets`); it is recorded over what the table recorded before.
        With a ``scope``, the snapshot records only what the scope keeps, of the table's old record too.
        ``task`` and ``valid_through_ms`` go into the summary as the Iceberg sink writes them
        (``kafka.connect.task-id``, ``kafka.connect.valid-through-ts``), for the tools that read them.
        """
        if scope is not None:
            positions = scope.offsets(positions)
        started = time.monotonic()
        writer = self._writer()
        files_json = json.dumps(files or [])
        commit_id = str(uuid.uuid4())
        for attempt in range(_VALIDATION_RETRIES + 1):
            table = handle.java
            try:
                base, recorded = read_refreshed(table, handle.branch, self._group_id, self._heads())
                current, recorded_epoch = recorded.offsets, recorded.epoch
                starts = {**recorded.round_start, **(round_start or {})}
                if scope is not None:
                    current, starts = scope.offsets(current), scope.round_start(starts)
            except JAVA_ERRORS as exc:
                raise CommitFailed(f"cannot read table {handle.name}: {java_error_message(exc)}",
                                   classify(exc)) from exc
            if epoch >= 0 and recorded_epoch > epoch:
                raise CommitFenced(f"table {handle.name} was committed by coordinator epoch {recorded_epoch}, "
                                   f"newer than this coordinator's {epoch}; it has lost its role")
            moved = {tp: (expected.get(tp), current.get(tp)) for tp in positions
                     if current.get(tp) != expected.get(tp)}
            if moved:
                detail = ", ".join(f"{t}[{p}] expected {e} found {f}" for (t, p), (e, f) in sorted(moved.items()))
                raise CommitFenced(f"table {handle.name} moved on since this sink read it ({detail}); "
                                   "another writer owns these partitions now")
            # A position below what the table records comes with no row of that partition for it (the
            # rows were cut at the table's floor): the table keeps its offset, which never goes back.
            merged = {**current, **{tp: pos for tp, pos in positions.items() if pos >= current.get(tp, pos)}}
            summary = {offsets_key(self._group_id): encode(merged), COMMIT_ID_KEY: commit_id,
                       CONNECTOR_KEY: self._connector}
            if epoch >= 0:
                summary[epoch_key(self._group_id)] = str(epoch)
            if starts:
                summary[round_start_key(self._group_id)] = encode(starts)
            if max_timestamp_ms is not None:
                summary[VTTS_KEY] = str(max_timestamp_ms)
            if valid_through_ms is not None:
                summary[VALID_THROUGH_KEY] = java_instant(valid_through_ms)
            if task:
                summary[TASK_ID_KEY] = task
            try:
                props = {property_key(self._group_id, handle.branch): property_value(merged, epoch, starts)}
                with self._positions(handle.name) as up_to_rows:
                    sought = up_to_rows > 0
                    report = json.loads(writer.commitJson(table, handle.branch, files_json, json.dumps(summary), base,
                                                          json.dumps(props), up_to_rows,
                                                          self._snapshot_bound(handle.name)))
            except JAVA_ERRORS as exc:
                kind = classify(exc)
                if kind is JavaErrorKind.VALIDATION and attempt < _VALIDATION_RETRIES:
                    # Someone else committed files (perhaps a compaction); re-check our offsets and retry.
                    if self._on_retry is not None:
                        self._on_retry(handle.name)
                    continue
                raise CommitFailed(f"commit to table {handle.name} failed: {java_error_message(exc)}", kind) from exc
            summary_now = report["summary"]
            totals = {k: int(summary_now.get(k) or 0) for k in _TOTALS}
            return CommitResult(handle.name, int(report["id"]), merged, int(report["files"]), int(report["records"]),
                                time.monotonic() - started, totals,
                                int(summary_now.get("added-equality-deletes") or 0),
                                int(summary_now.get("added-position-deletes") or 0), sought)
        raise CommitFailed(f"commit to table {handle.name} kept conflicting with concurrent commits",
                           JavaErrorKind.CONFLICT)

    def set_offsets(self, handle: TableHandle, offsets: dict[TopicPartition, int]) -> int:
        """An offsets-only snapshot that records exactly ``offsets``: an operator's change, made while the
        connector is stopped and its consumer group empty (Connect's ``PATCH``/``DELETE
        /connectors/{c}/offsets``). Returns its id.

        Offsets may go back, which no sink commit may do.  It records no coordinator epoch: the change
        deletes the consumer group (see :mod:`tabletopic.connectors.offsets`), whose generations then start
        again from the beginning, and a recorded epoch would fence every coordinator of the new group.
        """
        writer = self._writer()
        try:
            table = handle.java
            table.refresh()
            base = int(self._heads().headSnapshotId(table, handle.branch))
            summary = {offsets_key(self._group_id): encode(offsets), COMMIT_ID_KEY: str(uuid.uuid4()),
                       CONNECTOR_KEY: self._connector}
            props = {property_key(self._group_id, handle.branch): property_value(offsets, -1)}
            # No deletes to resolve: commitWith with none commits the snapshot as it is.
            return int(writer.commitWith(table, handle.branch, self._empty_list(), None, summary, base, props))
        except JAVA_ERRORS as exc:
            raise CommitFailed(f"cannot set the offsets of table {handle.name}: {java_error_message(exc)}",
                               classify(exc)) from exc
