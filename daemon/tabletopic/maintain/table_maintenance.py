"""Carry out a maintenance plan on one table through Iceberg's Spark actions.

Why it is safe beside the sink's own commits:

* **Conversion** of equality deletes into position deletes names the rows each equality
  delete removes by file and position, and swaps the two in one RowDelta that fails if a
  data file it names was replaced meanwhile (see ``DeleteConversion``).
* **Compaction** commits a ``replace`` snapshot whose new files take the data sequence
  number of the snapshot the rewrite *started* from (``use-starting-sequence-number``).
  An equality delete the sink commits while the rewrite runs has a higher sequence
  number, so it still applies to the rewritten rows; Iceberg's validation of a rewrite
  ignores such equality deletes for exactly that reason, and fails it only on new
  position deletes against the files it replaced (the sink writes none).
* **Deletes that no longer apply** are dropped by our own rule, not Spark's
  ``remove-dangling-deletes``, which takes an upsert table's global equality deletes for
  dangling while they still apply (see ``FileCensus.removeDanglingDeletes``).  The sink's
  RowDelta validation looks at appends and deletes, not replaces, so neither side
  needs to retry because of the other.  The same holds when someone else runs
  ``rewrite_data_files``.
* **Expiry** is cut off so that the newest snapshot holding each group's offsets stays
  (see :mod:`tabletopic.maintain.plan`); were someone else's expiry to remove it, the
  offsets table property written in the same commit answers (see
  :mod:`tabletopic.offsets.source_offsets`).
* **Orphan removal** only takes files older than ``orphans.older-than-ms``, and the
  coordinator never commits files that waited for more than half of it.
* A maintenance run started by a coordinator that has lost its role is harmless for the
  same reasons; it stops between steps when ``keep_going`` says so.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tabletopic.config.maintenance_settings import MaintenanceSettings
from tabletopic.maintain.plan import MaintenancePlan
from tabletopic.maintain.table_stats import MAINTAINED_BY_KEY, TableStats, stats_from_java
from tabletopic.write.table_actions import TableActions


class MaintenanceStopped(RuntimeError):
    """The run was asked to stop (shutdown, or the coordinator lost its role) between two steps."""


@dataclass
class MaintenanceReport:
    table: str
    before: TableStats
    after: TableStats | None = None
    equality_deletes_converted: int = 0
    conversion_refused: bool = False  # a data file it named was replaced meanwhile; tried again next time
    position_delete_files: int = 0
    rows_deleted_by_position: int = 0
    rewritten_files: int = 0
    added_files: int = 0
    rewritten_bytes: int = 0
    deletes_removed: int = 0
    snapshots_expired: int = 0
    files_deleted_by_expiry: int = 0
    orphans_removed: int = 0
    manifests_rewritten: int = 0
    steps: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def describe(self) -> list[str]:
        lines = [f"before: {self.before.describe()}"]
        if "compact" in self.steps:
            lines.append(f"compacted: {self.rewritten_files} data files -> {self.added_files}, "
                         f"{self.rewritten_bytes} bytes rewritten, {self.deletes_removed} delete files folded")
        if self.conversion_refused:
            lines.append("conversion refused: a data file it named was replaced meanwhile; the next "
                         "conversion works from the new files")
        elif "convert" in self.steps:
            lines.append(f"converted: {self.equality_deletes_converted} equality delete files -> "
                         f"{self.position_delete_files} position delete files naming "
                         f"{self.rows_deleted_by_position} rows")
        if "expire" in self.steps:
            lines.append(f"expired: {self.snapshots_expired} snapshots, {self.files_deleted_by_expiry} files deleted")
        if "orphans" in self.steps:
            lines.append(f"orphan files removed: {self.orphans_removed}")
        if "manifests" in self.steps:
            lines.append(f"manifests rewritten: {self.manifests_rewritten}")
        if self.after is not None:
            lines.append(f"after: {self.after.describe()}")
        lines.append(f"took {self.seconds:.1f}s")
        return lines


def _remove_dangling(actions: TableActions, maintained_by: str) -> int:
    """Remove the delete files that apply to no data file any more: the count, 0 when another commit came
    between (the next look tries again)."""
    return max(0, actions.remove_dangling_deletes({MAINTAINED_BY_KEY: maintained_by}))


def _delete_file_threshold(actions: TableActions, settings: MaintenanceSettings) -> int:
    """What Spark's rewrite compares with the delete files of each data file.

    A data file of a v3 table carries at most one deletion vector, so the setting, compared per file,
    would never pick one: the census counts the vectors of a partition instead (each is a file a
    reader opens there), and once they pass the setting, every data file carrying one is rewritten."""
    if actions.format_version() >= 3:
        return 1
    return settings.delete_files


def run_plan(actions: TableActions, name: str, plan: MaintenancePlan, before: TableStats,
             settings: MaintenanceSettings, maintained_by: str,
             keep_going: Callable[[], bool] = lambda: True,
             starting: Callable[[str], None] = lambda step: None) -> MaintenanceReport:
    """Run ``plan``'s steps on the table of ``actions`` in order, checking ``keep_going`` before each and
    telling ``starting`` its name."""
    started = time.monotonic()
    report = MaintenanceReport(name, before)
    marks = {MAINTAINED_BY_KEY: maintained_by}

    def step(what: str) -> None:
        if not keep_going():
            raise MaintenanceStopped(f"maintenance of {name} stopped before {what}")
        starting(what)
        report.steps.append(what)

    if plan.compact:
        step("compact")
        compaction = actions.compact({
            "min-input-files": str(plan.compact_min_input_files or settings.min_input_files),
            # The files the census counted as small, and no others: a file it did not count is left alone.
            "min-file-size-bytes": str(before.small_file_bytes),
            "delete-file-threshold": str(_delete_file_threshold(actions, settings)),
            # Why: see the module's docstring; it is Iceberg's default, stated so nobody turns it off.
            "use-starting-sequence-number": "true",
            # Never Spark's remove-dangling-deletes: see FileCensus.removeDanglingDeletes.
            "remove-dangling-deletes": "false",
            "max-file-group-size-bytes": str(settings.max_group_bytes),
            "max-concurrent-file-group-rewrites": "1",
            "partial-progress.enabled": "true",
            "partial-progress.max-commits": "20"}, marks)
        report.rewritten_files = compaction.rewritten_files
        report.added_files = compaction.added_files
        report.rewritten_bytes = compaction.rewritten_bytes
        report.deletes_removed = _remove_dangling(actions, maintained_by)
    elif plan.remove_dangling:
        step("dangling")
        report.deletes_removed = _remove_dangling(actions, maintained_by)
    # After a compaction, not before it: the equality deletes the sink committed while it ran are what
    # readers would pay for until the next look.
    if plan.convert or (plan.compact and settings.convert_equality_deletes):
        step("convert")
        conversion = actions.convert_equality_deletes(marks)
        # Refused: a compaction replaced a data file meanwhile; the next conversion works from the new files.
        report.conversion_refused = conversion.refused
        report.equality_deletes_converted = conversion.equality_deletes_removed
        report.position_delete_files = conversion.position_delete_files_added
        report.rows_deleted_by_position = conversion.rows_deleted
    if plan.expire is not None:
        step("expire")
        before_count = actions.snapshot_count()
        report.files_deleted_by_expiry = actions.expire_snapshots(plan.expire.older_than_ms, settings.retain_last)
        report.snapshots_expired = max(0, before_count - actions.snapshot_count())
    if plan.rewrite_manifests:
        step("manifests")
        report.manifests_rewritten = actions.rewrite_manifests(marks)
    if plan.remove_orphans:
        step("orphans")
        report.orphans_removed = actions.remove_orphans(settings.orphan_age_s)
    report.after = stats_from_java(actions)
    report.seconds = time.monotonic() - started
    return report
