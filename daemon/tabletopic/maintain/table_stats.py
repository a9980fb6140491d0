"""What maintenance looks at: a table's file counts and its snapshots, read from metadata only.

Read through the JVM by the daemon (:func:`stats_from_java`) and through pyiceberg by
``tabletopic maintain --dry-run`` (:func:`stats_from_pyiceberg`), into the same shapes, so
that both plan with one function (:mod:`tabletopic.maintain.plan`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from tabletopic.offsets.source_offsets import OFFSETS_KEY_PREFIX
from tabletopic.write.table_actions import TableActions

# In the summary of every snapshot the connector's maintenance makes: what tells its rewrites from others'.
MAINTAINED_BY_KEY = "tabletopic.maintained-by"
DEFAULT_TARGET_FILE_BYTES = 512 * 1024 * 1024  # Iceberg's write.target-file-size-bytes default
# A data file under a quarter of the target is small: compaction rewrites it, and counts it toward
# min-input-files. Spark's own bound is 75%: with it, a compaction's output under 384 MiB stays small,
# and the next look rewrites it again with the new files (tests/test_maintenance.py shows the case).
SMALL_FRACTION = 0.25


@dataclass(frozen=True)
class SnapshotInfo:
    snapshot_id: int
    parent_id: int | None
    timestamp_ms: int
    offsets_groups: frozenset[str]  # consumer groups whose offsets this snapshot carries
    foreign_rewrite: bool = False  # a rewrite (operation "replace") that no tabletopic maintenance made


@dataclass(frozen=True)
class TableStats:
    data_files: int
    delete_files: int
    most_files_in_partition: int
    most_small_files_in_partition: int
    manifests: int
    most_deletes_per_file: int  # delete files applying to one data file, at most (Spark's delete-file-threshold)
    records: int
    total_bytes: int
    snapshots: tuple[SnapshotInfo, ...]
    heads: tuple[int, ...]  # the snapshot each branch points at; main first
    equality_deletes: int = 0  # of delete_files, the equality deletes
    # The bytes of the small data files of the partitions holding two or more: what a compaction
    # taking any two small files would rewrite.
    paired_small_bytes: int = 0
    # Under this many bytes a data file counted as small; the compaction rewrites only such files.
    small_file_bytes: int = int(DEFAULT_TARGET_FILE_BYTES * SMALL_FRACTION)

    def describe(self) -> str:
        return (f"{self.data_files} data files ({self.most_files_in_partition} in the fullest partition, "
                f"{self.most_small_files_in_partition} small; {self.paired_small_bytes} bytes in small files that "
                f"share a partition), "
                f"{self.delete_files} delete files "
                f"({self.equality_deletes} equality, at most {self.most_deletes_per_file} on one data file), "
                f"{len(self.snapshots)} snapshots, {self.manifests} manifests, {self.records} records, "
                f"{self.total_bytes} bytes")


def small_file_bytes(properties: Any) -> int:
    target = properties.get("write.target-file-size-bytes")
    return int(int(target or DEFAULT_TARGET_FILE_BYTES) * SMALL_FRACTION)


def _groups(keys: Any) -> frozenset[str]:
    return frozenset(k[len(OFFSETS_KEY_PREFIX):] for k in keys if k.startswith(OFFSETS_KEY_PREFIX))


def _foreign_rewrite(operation: Any, keys: Any) -> bool:
    # A rewrite of data files (not of manifests, which replace none) that our maintenance did not make.
    names = set(keys)
    return str(operation) == "replace" and "deleted-data-files" in names and MAINTAINED_BY_KEY not in names


def stats_from_java(actions: TableActions) -> TableStats:
    """The figures of the table ``actions`` maintains, refreshed, through the JVM."""
    facts = actions.facts()
    small = small_file_bytes(facts.properties)
    census = actions.census(small)
    snapshots = tuple(SnapshotInfo(s.snapshot_id, s.parent_id, s.timestamp_ms, _groups(s.summary_keys),
                                   _foreign_rewrite(s.operation, s.summary_keys))
                      for s in facts.snapshots)
    main = facts.main
    return TableStats(census.data_files, census.delete_files, census.most_files_in_partition,
                      census.most_small_files_in_partition, census.manifests, census.most_deletes_per_file,
                      facts.total_records, facts.total_bytes, snapshots,
                      tuple([main] if main is not None else []) + tuple(h for h in facts.branch_heads if h != main),
                      census.equality_deletes, census.paired_small_bytes, small)


def stats_from_pyiceberg(table: Any) -> TableStats:
    """The same figures through pyiceberg: no JVM, for ``tabletopic maintain --dry-run``."""
    small = small_file_bytes(table.properties)
    snapshots = tuple(SnapshotInfo(s.snapshot_id, s.parent_snapshot_id, s.timestamp_ms,
                                   _groups((s.summary.additional_properties if s.summary else {}).keys()),
                                   _foreign_rewrite(s.summary.operation.value if s.summary else None,
                                                    (s.summary.additional_properties if s.summary else {}).keys()))
                      for s in table.metadata.snapshots)
    current = table.current_snapshot()
    if current is None:
        return TableStats(0, 0, 0, 0, 0, 0, 0, 0, snapshots, ())
    specs = table.metadata.specs()
    data: Counter[tuple[int, str]] = Counter()
    small_data: Counter[tuple[int, str]] = Counter()
    small_bytes: Counter[tuple[int, str]] = Counter()
    oldest: dict[tuple[int, str], int] = {}
    global_deletes: list[tuple[int, bool]] = []
    local_deletes: dict[tuple[int, str], list[tuple[int, bool]]] = {}
    manifests = current.manifests(table.io)
    deletes = 0
    equality_deletes = 0
    for manifest in manifests:
        spec_id = manifest.partition_spec_id
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            file = entry.data_file
            key = (spec_id, repr(file.partition))
            sequence = entry.sequence_number or 0
            if file.content == 0:
                data[key] += 1
                small_data[key] += file.file_size_in_bytes < small
                small_bytes[key] += file.file_size_in_bytes if file.file_size_in_bytes < small else 0
                oldest[key] = min(oldest.get(key, sequence), sequence)
                continue
            deletes += 1
            equality = file.content == 2
            equality_deletes += equality
            if specs[spec_id].is_unpartitioned():
                global_deletes.append((sequence, equality))
            else:
                local_deletes.setdefault(key, []).append((sequence, equality))

    def applying(deletes: list[tuple[int, bool]], sequence: int) -> int:
        # An equality delete applies to older data, a position delete to data as old or older.
        return sum(1 for s, equality in deletes if (s > sequence if equality else s >= sequence))

    most_deletes = max((applying(global_deletes, s) + applying(local_deletes.get(k, []), s)
                        for k, s in oldest.items()), default=0)
    summary = current.summary.additional_properties if current.summary else {}
    heads = [ref.snapshot_id for name, ref in table.metadata.refs.items()
             if ref.snapshot_ref_type == "branch" and name != "main"]
    return TableStats(sum(data.values()), deletes, max(data.values(), default=0),
                      max(small_data.values(), default=0), len(manifests), most_deletes,
                      int(summary.get("total-records", 0)), int(summary.get("total-files-size", 0)),
                      snapshots, (current.snapshot_id, *heads), equality_deletes,
                      sum(b for k, b in small_bytes.items() if small_data[k] >= 2), small)
