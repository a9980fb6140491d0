"""What a table needs, decided from its metadata alone: a pure function, shared by the daemon and
``tabletopic maintain --dry-run``.

Expiry never removes the snapshot a connector finds its offsets in: for every branch, the
newest snapshot carrying each consumer group's offsets (and everything newer) is kept, by
moving the expiry cut-off back to it.  A walk from the branch head then always reaches it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tabletopic.config.maintenance_settings import MaintenanceSettings
from tabletopic.maintain.table_stats import SnapshotInfo, TableStats


@dataclass(frozen=True)
class Expiry:
    older_than_ms: int  # the cut-off given to Iceberg: snapshots older than it may go
    expiring: tuple[int, ...]  # the snapshots that will go, as far as metadata tells
    kept_for_offsets: tuple[int, ...]  # snapshots kept only because they hold offsets


@dataclass(frozen=True)
class MaintenancePlan:
    compact: str | None  # why, or None
    expire: Expiry | None
    rewrite_manifests: str | None
    remove_orphans: bool
    convert: str | None = None  # why equality deletes are turned into position deletes, or None
    compact_min_input_files: int = 0  # the compaction's min-input-files: a cheap rewrite takes two
    # Why delete files that no longer apply are removed without a compaction of ours, or None: another
    # engine's rewrites leave them behind.
    remove_dangling: str | None = None

    @property
    def empty(self) -> bool:
        return not (self.convert or self.compact or self.expire or self.rewrite_manifests or self.remove_orphans
                    or self.remove_dangling)

    def describe(self) -> list[str]:
        lines = [f"compact: {self.compact or 'not needed'}"]
        if self.remove_dangling:
            lines.append(f"remove dangling delete files: {self.remove_dangling}")
        lines.append(f"convert equality deletes to position deletes: {self.convert or 'not needed'}")
        if self.expire is None:
            lines.append("expire snapshots: none due")
        else:
            lines.append(f"expire snapshots: {len(self.expire.expiring)} older than {self.expire.older_than_ms} ms"
                         + (f" (kept for offsets: {', '.join(map(str, self.expire.kept_for_offsets))})"
                            if self.expire.kept_for_offsets else ""))
        lines.append(f"rewrite manifests: {self.rewrite_manifests or 'not needed'}")
        lines.append("remove orphan files: " + ("due" if self.remove_orphans else "not due"))
        return lines


def plan_maintenance(stats: TableStats, settings: MaintenanceSettings, now_ms: int,
                     orphans_due: bool) -> MaintenancePlan:
    manifests = (f"{stats.manifests} manifests (threshold {settings.max_manifests})"
                 if stats.manifests > settings.max_manifests else None)
    base = MaintenancePlan(None, plan_expiry(stats.snapshots, stats.heads, settings, now_ms), manifests,
                           orphans_due and bool(stats.snapshots), _conversion(stats, settings))
    if not settings.compaction:
        # Another engine compacts it: its rewrites leave the deletes they applied behind, which cost
        # readers until they are removed.
        return replace(base, remove_dangling="another engine compacts this table" if stats.delete_files else None)
    compact = None
    if stats.most_deletes_per_file >= settings.delete_files:
        compact = (f"{stats.most_deletes_per_file} delete files apply to one data file "
                   f"(threshold {settings.delete_files})")
    elif stats.most_small_files_in_partition >= settings.min_input_files:
        compact = (f"{stats.most_small_files_in_partition} small data files in one partition "
                   f"(threshold {settings.min_input_files})")
    # Readers pay per file they open; rewriting is paid per byte. Below the bound, the bytes are cheap.
    cheap = 0 < stats.paired_small_bytes <= settings.cheap_rewrite_bytes
    if compact is None and cheap:
        compact = (f"{stats.paired_small_bytes} bytes of small data files that share a partition "
                   f"(cheap to rewrite up to {settings.cheap_rewrite_bytes})")
    return replace(base, compact=compact, compact_min_input_files=2 if cheap else settings.min_input_files)


def plan_conversion(stats: TableStats, settings: MaintenanceSettings) -> MaintenancePlan:
    """Between looks, at every commit round (``equality-deletes.convert=round``): only the conversion
    of equality deletes, which costs a fraction of a compaction and which readers feel at once."""
    return MaintenancePlan(None, None, None, False, _conversion(stats, settings))


def _conversion(stats: TableStats, settings: MaintenanceSettings) -> str | None:
    if not (settings.convert_equality_deletes and stats.equality_deletes):
        return None
    return f"{stats.equality_deletes} equality delete files"


def plan_expiry(snapshots: tuple[SnapshotInfo, ...], heads: tuple[int, ...], settings: MaintenanceSettings,
                now_ms: int) -> Expiry | None:
    """The cut-off that expires what is older than the setting, except the last ``retain_last`` of each
    branch and the newest offsets of each group on each branch; None when nothing would go."""
    by_id = {s.snapshot_id: s for s in snapshots}
    cutoff = now_ms - int(settings.snapshot_age_s * 1000)
    retained: set[int] = set()
    protected: set[int] = set()
    for head in heads:
        seen_groups: set[str] = set()
        snapshot = by_id.get(head)
        depth = 0
        while snapshot is not None:
            if depth < settings.retain_last:
                retained.add(snapshot.snapshot_id)
            for group in snapshot.offsets_groups - seen_groups:
                seen_groups.add(group)
                protected.add(snapshot.snapshot_id)
            depth += 1
            snapshot = by_id.get(snapshot.parent_id) if snapshot.parent_id is not None else None
    base_cutoff = cutoff
    for snapshot_id in protected:
        cutoff = min(cutoff, by_id[snapshot_id].timestamp_ms)
    expiring = tuple(s.snapshot_id for s in snapshots if s.timestamp_ms < cutoff and s.snapshot_id not in retained)
    if not expiring:
        return None
    kept = tuple(sorted(i for i in protected if by_id[i].timestamp_ms < base_cutoff and i not in retained))
    return Expiry(cutoff, expiring, kept)
