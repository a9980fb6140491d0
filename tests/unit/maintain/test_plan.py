"""Planning maintenance from metadata: triggers, and expiry that never takes the offsets' snapshot."""

from __future__ import annotations

from dataclasses import replace

from tabletopic.config.maintenance_settings import MaintenanceSettings
from tabletopic.maintain.plan import plan_expiry, plan_maintenance
from tabletopic.maintain.table_stats import SnapshotInfo, TableStats

SETTINGS = MaintenanceSettings(mode="auto", interval_s=0, conversion="look", commit_max_rows=0, min_input_files=10,
                               cheap_rewrite_bytes=64 << 20, delete_files=8,
                               max_group_bytes=1 << 28, snapshot_age_s=3600, retain_last=2, max_snapshots=200,
                               orphan_age_s=86400, orphan_interval_s=86400, max_manifests=50)
NOW = 100 * 3_600_000
G = frozenset({"connect-a"})


def chain(*specs: tuple[int, frozenset[str]]) -> tuple[SnapshotInfo, ...]:
    """Snapshots 1..n, each the parent of the next, ``hours_ago`` old."""
    return tuple(SnapshotInfo(i + 1, i or None, NOW - hours * 3_600_000, groups)
                 for i, (hours, groups) in enumerate(specs))


def stats(**changes: int) -> TableStats:
    base = TableStats(data_files=5, delete_files=0, most_files_in_partition=5, most_small_files_in_partition=5,
                      manifests=3, most_deletes_per_file=0, records=10, total_bytes=100, snapshots=(), heads=())
    return replace(base, **changes)


def test_old_snapshots_expire_beyond_the_last_ones_kept() -> None:
    snapshots = chain((9, G), (8, G), (7, G), (6, G), (0, G))
    expiry = plan_expiry(snapshots, (5,), SETTINGS, NOW)
    assert expiry is not None and expiry.expiring == (1, 2, 3) and expiry.kept_for_offsets == ()


def test_the_newest_snapshot_with_a_groups_offsets_is_kept_however_old() -> None:
    # Snapshots 3-5 are compactions and expiries by someone else: none carries the offsets.
    snapshots = chain((9, G), (8, G), (7, frozenset()), (6, frozenset()), (5, frozenset()))
    expiry = plan_expiry(snapshots, (5,), SETTINGS, NOW)
    assert expiry is not None and expiry.expiring == (1,) and expiry.kept_for_offsets == (2,)
    assert expiry.older_than_ms == snapshots[1].timestamp_ms  # Iceberg keeps what is not older


def test_each_group_keeps_its_own_newest_offsets() -> None:
    b = frozenset({"connect-b"})
    snapshots = chain((9, b), (8, G), (7, G), (1, frozenset()), (0, frozenset()))
    expiry = plan_expiry(snapshots, (5,), SETTINGS, NOW)
    assert expiry is None  # connect-b's only snapshot is the oldest: nothing may go


def test_nothing_to_expire_is_no_expiry() -> None:
    assert plan_expiry(chain((0.5, G), (0.2, G)), (2,), SETTINGS, NOW) is None


def test_compaction_triggers_on_deletes_per_data_file_or_small_files() -> None:
    assert plan_maintenance(stats(), SETTINGS, NOW, orphans_due=False).empty
    by_deletes = plan_maintenance(stats(delete_files=30, most_deletes_per_file=8), SETTINGS, NOW, False)
    assert by_deletes.compact is not None and "8 delete files apply" in by_deletes.compact
    # Many delete files that apply to no data file older than them do not trigger a rewrite.
    assert plan_maintenance(stats(delete_files=30, most_deletes_per_file=7), SETTINGS, NOW, False).compact is None
    assert plan_maintenance(stats(most_small_files_in_partition=10), SETTINGS, NOW, False).compact is not None
    assert plan_maintenance(stats(manifests=51), SETTINGS, NOW, False).rewrite_manifests is not None


def test_two_small_files_are_compacted_while_rewriting_them_is_cheap() -> None:
    cheap = plan_maintenance(stats(most_small_files_in_partition=2, paired_small_bytes=64 << 20), SETTINGS, NOW,
                             False)
    assert cheap.compact is not None and "cheap to rewrite" in cheap.compact
    assert cheap.compact_min_input_files == 2
    # One byte more, and it waits for min-input-files, which the Spark action is then given.
    dear = plan_maintenance(stats(most_small_files_in_partition=9, paired_small_bytes=(64 << 20) + 1), SETTINGS,
                            NOW, False)
    assert dear.compact is None
    assert plan_maintenance(stats(most_small_files_in_partition=10, paired_small_bytes=1 << 40), SETTINGS, NOW,
                            False).compact_min_input_files == 10
    # Small files alone in their partitions are not rewritten, whatever their bytes.
    assert plan_maintenance(stats(most_small_files_in_partition=1, paired_small_bytes=0), SETTINGS, NOW,
                            False).compact is None
    off = replace(SETTINGS, cheap_rewrite_bytes=0)
    assert plan_maintenance(stats(most_small_files_in_partition=2, paired_small_bytes=1), off, NOW, False).empty


def test_equality_deletes_are_converted_whenever_there_are_any_unless_turned_off() -> None:
    plan = plan_maintenance(stats(delete_files=3, equality_deletes=2), SETTINGS, NOW, False)
    assert plan.convert == "2 equality delete files" and plan.compact is None
    assert plan_maintenance(stats(delete_files=3, equality_deletes=0), SETTINGS, NOW, False).empty
    off = replace(SETTINGS, conversion="off")
    assert plan_maintenance(stats(delete_files=3, equality_deletes=2), off, NOW, False).empty


def test_enabled_for_upsert_tables_by_default() -> None:
    assert SETTINGS.enabled_for(keyed=True) and not SETTINGS.enabled_for(keyed=False)
    assert replace(SETTINGS, mode="true").enabled_for(keyed=False)
    assert not replace(SETTINGS, mode="false").enabled_for(keyed=True)


def test_a_table_another_engine_compacts_is_never_compacted_here_and_sheds_dangling_deletes() -> None:
    beside = replace(SETTINGS, conversion="commit").beside_external_compaction()
    assert (beside.conversion, beside.compaction) == ("look", False)
    assert replace(SETTINGS, conversion="off").beside_external_compaction().conversion == "off"
    busy = stats(delete_files=30, equality_deletes=20, most_deletes_per_file=30, most_small_files_in_partition=50,
                 paired_small_bytes=1_000)
    plan = plan_maintenance(busy, beside, NOW, orphans_due=False)
    assert plan.compact is None and plan.remove_dangling and plan.convert == "20 equality delete files"
    assert "remove dangling delete files: another engine compacts this table" in plan.describe()
    # Its usual steps stay: with no delete files, nothing to shed.
    quiet = plan_maintenance(stats(manifests=60), beside, NOW, orphans_due=True)
    assert quiet.remove_dangling is None and quiet.rewrite_manifests
