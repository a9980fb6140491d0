"""The commit-time snapshot bound holds unless maintenance is off, append tables included."""

from dataclasses import replace

from tests.unit.maintain.test_plan import SETTINGS


def test_the_snapshot_bound_holds_in_auto_and_true_modes_and_not_when_maintenance_is_off() -> None:
    assert SETTINGS.mode == "auto" and SETTINGS.snapshot_bound == 200
    assert not SETTINGS.enabled_for(keyed=False)  # no looks for an append table in auto mode, but the bound
    assert replace(SETTINGS, mode="true").snapshot_bound == 200
    assert replace(SETTINGS, mode="false").snapshot_bound == 0
    assert replace(SETTINGS, max_snapshots=0).snapshot_bound == 0
