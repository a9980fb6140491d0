"""What table maintenance asks of the JVM, typed: Spark's actions on one table and tabletopic's census.

``maintain/`` decides what to do from figures; this module is the only place that calls the Java side
for it (Spark's ``SparkActions``, and ``FileCensus`` and ``DeleteConversion`` from tabletopic's own
Java), and hands back plain numbers. Every call blocks on the JVM: call from a worker thread, never
from the event loop.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from tabletopic.write.spark_session import SparkRuntime


@dataclass(frozen=True)
class FileCensus:
    """The files of a table's current snapshot, counted by the Java census in one pass over its manifests."""

    data_files: int
    delete_files: int
    most_files_in_partition: int
    most_small_files_in_partition: int
    manifests: int
    most_deletes_per_file: int
    equality_deletes: int
    paired_small_bytes: int


@dataclass(frozen=True)
class Compaction:
    rewritten_files: int
    added_files: int
    rewritten_bytes: int


@dataclass(frozen=True)
class Conversion:
    """Equality deletes turned into position deletes; ``refused`` when a data file it named was replaced."""

    refused: bool
    equality_deletes_removed: int
    position_delete_files_added: int
    rows_deleted: int


@dataclass(frozen=True)
class SnapshotFacts:
    """What maintenance needs of one snapshot: its lineage, time and summary keys."""

    snapshot_id: int
    parent_id: int | None
    timestamp_ms: int
    operation: str
    summary_keys: frozenset[str]


@dataclass(frozen=True)
class TableFacts:
    """A table's snapshots, branch heads and current totals, read in one refresh."""

    snapshots: tuple[SnapshotFacts, ...]
    main: int | None
    branch_heads: tuple[int, ...]
    total_records: int
    total_bytes: int
    properties: dict[str, str]


class TableActions:
    """Maintenance of one loaded table (a Java ``Table``), through the runtime's Spark session."""

    def __init__(self, spark: SparkRuntime, table: Any) -> None:
        self._spark = spark
        self._table = table

    def facts(self) -> TableFacts:
        """Refresh the table, and read its snapshots, heads and totals."""
        table = self._table
        table.refresh()
        snapshots = tuple(
            SnapshotFacts(int(s.snapshotId()), None if s.parentId() is None else int(s.parentId()),
                          int(s.timestampMillis()), str(s.operation()), frozenset(str(k) for k in s.summary().keySet()))
            for s in table.snapshots())
        current = table.currentSnapshot()
        summary = current.summary() if current is not None else None
        refs = table.refs()
        heads = tuple(int(refs.get(n).snapshotId()) for n in refs.keySet() if refs.get(n).isBranch())
        props = table.properties()
        return TableFacts(snapshots, int(current.snapshotId()) if current is not None else None, heads,
                          int(summary.get("total-records") or 0) if summary is not None else 0,
                          int(summary.get("total-files-size") or 0) if summary is not None else 0,
                          {str(k): str(props.get(k)) for k in props.keySet()})

    def census(self, small_file_bytes: int) -> FileCensus:
        c = self._spark.java_class("tabletopic.FileCensus").count(self._table, small_file_bytes)
        return FileCensus(int(c.dataFiles()), int(c.deleteFiles()), int(c.mostFilesInPartition()),
                          int(c.mostSmallFilesInPartition()), int(c.manifests()), int(c.mostDeletesPerFile()),
                          int(c.equalityDeletes()), int(c.pairedSmallBytes()))

    def format_version(self) -> int:
        return int(self._spark.java_class("org.apache.iceberg.TableUtil").formatVersion(self._table))

    def location(self) -> str:
        return str(self._table.location())

    def snapshot_count(self) -> int:
        return len(list(self._table.snapshots()))

    def _actions(self) -> Any:
        session = self._spark.activate()
        return self._spark.java_class("org.apache.iceberg.spark.actions.SparkActions").get(session._jsparkSession)

    def compact(self, options: dict[str, str], marks: dict[str, str]) -> Compaction:
        """Spark's rewrite of data files with ``options``, each commit's summary carrying ``marks``."""
        action = self._actions().rewriteDataFiles(self._table)
        for key, value in options.items():
            action = action.option(key, value)
        for key, value in marks.items():
            action = action.snapshotProperty(key, value)
        result = action.execute()
        self._table.refresh()
        return Compaction(int(result.rewrittenDataFilesCount()), int(result.addedDataFilesCount()),
                          int(result.rewrittenBytesCount()))

    def remove_dangling_deletes(self, marks: dict[str, str]) -> int:
        """Delete files that apply to no data file any more, removed: the count, or -1 when another commit
        came between."""
        removed = int(self._spark.java_class("tabletopic.FileCensus").removeDanglingDeletes(self._table, marks))
        self._table.refresh()
        return removed

    def convert_equality_deletes(self, marks: dict[str, str]) -> Conversion:
        c = self._spark.java_class("tabletopic.DeleteConversion").convert(self._table, marks)
        self._table.refresh()
        return Conversion(bool(c.refused()), int(c.equalityDeletesRemoved()), int(c.positionDeleteFilesAdded()),
                          int(c.rowsDeleted()))

    def expire_snapshots(self, older_than_ms: int, retain_last: int) -> int:
        """Expire snapshots; the files deleted with them."""
        result = self._actions().expireSnapshots(self._table).expireOlderThan(older_than_ms) \
            .retainLast(retain_last).execute()
        self._table.refresh()
        return sum(int(getattr(result, g)()) for g in (
            "deletedDataFilesCount", "deletedEqualityDeleteFilesCount", "deletedPositionDeleteFilesCount",
            "deletedManifestsCount", "deletedManifestListsCount"))

    def rewrite_manifests(self, marks: dict[str, str]) -> int:
        action = self._actions().rewriteManifests(self._table)
        for key, value in marks.items():
            action = action.snapshotProperty(key, value)
        result = action.execute()
        self._table.refresh()
        return len(list(result.rewrittenManifests()))

    def remove_orphans(self, older_than_s: float) -> int:
        """Files under the table's location that no snapshot references, older than ``older_than_s``."""
        action = self._actions().deleteOrphanFiles(self._table).olderThan(
            int(time.time() * 1000 - older_than_s * 1000))
        location = self.location()
        if not location.startswith("file:") and not location.startswith("/"):
            # Object stores: list through the table's own FileIO (S3FileIO), not a Hadoop file system.
            action = action.usePrefixListing(True)
        return len(list(action.execute().orphanFileLocations()))
