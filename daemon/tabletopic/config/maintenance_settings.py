"""How a connector keeps its tables fast: the ``tabletopic.maintenance.*`` keys, typed.

The keys themselves (types, defaults, documentation) are declared with every other
connector key in :mod:`tabletopic.config.connector`; this is their parsed form.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

MB = 1024 * 1024


@dataclass(frozen=True)
class MaintenanceSettings:
    mode: str  # "auto" (upsert and CDC connectors only), "true" or "false"
    interval_s: float  # how often each table is looked at
    conversion: str  # equality deletes into position deletes: "commit" (in each commit), "look", "round" or "off"
    commit_max_rows: int  # with "commit": the most rows a commit may read to carry position deletes
    min_input_files: int  # small data files in one partition that make it worth compacting
    cheap_rewrite_bytes: int  # up to this many bytes (TableStats.paired_small_bytes), two small files are worth it
    delete_files: int  # delete files that make the table worth compacting
    max_group_bytes: int  # one rewrite job's input: what a round may wait behind
    snapshot_age_s: float
    retain_last: int
    max_snapshots: int  # a commit finding more expires the oldest, down to half of this; 0: never
    orphan_age_s: float
    orphan_interval_s: float
    max_manifests: int
    compaction: bool = True  # False: another engine compacts the table (iceberg.table.<t>.external-compaction)

    @property
    def convert_equality_deletes(self) -> bool:
        return self.conversion != "off"

    @property
    def converts_at_commit(self) -> bool:
        return self.conversion == "commit"

    @property
    def converts_every_round(self) -> bool:
        """Whether each round between looks converts the equality deletes it finds: with "round" all of
        them, with "commit" those of commits that could not carry position deletes."""
        return self.conversion in ("round", "commit")

    def beside_external_compaction(self) -> MaintenanceSettings:
        """For a table another engine compacts. Its rewrites fail on any position delete committed, while
        they run, against a file they replace: so commits carry equality deletes only, and only the looks
        convert them, a few short commits an interval apart. The connector's own compaction would race
        the other engine's, so it is off."""
        return replace(self, conversion="off" if self.conversion == "off" else "look", compaction=False)

    def enabled_for(self, keyed: bool) -> bool:
        return self.mode == "true" or (self.mode == "auto" and keyed)

    @property
    def snapshot_bound(self) -> int:
        """The most snapshots a commit leaves a table with before expiring the oldest (0: no bound). Unlike
        the looks, it holds for append tables in ``auto`` mode too: their metadata grows with every commit."""
        return 0 if self.mode == "false" else self.max_snapshots

    @property
    def max_file_wait_s(self) -> float:
        """How long written files may wait for their commit: half the orphan guard, so that orphan
        removal can never take a file that is still on its way to a snapshot."""
        return self.orphan_age_s / 2


def settings_from(values: dict[str, Any]) -> MaintenanceSettings:
    p = "tabletopic.maintenance."
    return MaintenanceSettings(
        mode=values[p + "enabled"],
        interval_s=values[p + "interval-ms"] / 1000,
        conversion=values[p + "equality-deletes.convert"],
        commit_max_rows=values[p + "equality-deletes.commit-max-rows"],
        min_input_files=values[p + "compaction.min-input-files"],
        cheap_rewrite_bytes=values[p + "compaction.cheap-rewrite-bytes"],
        delete_files=values[p + "compaction.delete-files"],
        max_group_bytes=values[p + "compaction.max-group-bytes"],
        snapshot_age_s=values[p + "snapshots.older-than-ms"] / 1000,
        retain_last=values[p + "snapshots.retain-last"],
        max_snapshots=values[p + "snapshots.max-count"],
        orphan_age_s=values[p + "orphans.older-than-ms"] / 1000,
        orphan_interval_s=values[p + "orphans.interval-ms"] / 1000,
        max_manifests=values[p + "manifests.max-count"],
    )
