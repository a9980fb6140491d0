"""When the maintainer looks at tables (one interval after it first sees them, then every interval), and what a
run does to the commits beside it."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest

from tabletopic.maintain.maintainer import Maintainer, MaintenanceFailed
from tests.unit.fakes import metrics
from tests.unit.maintain.test_plan import SETTINGS


def _maintainer(now: list[float], names: set[str], enabled: bool = True, conversion: str = "look") -> Maintainer:
    tables: Any = None  # due() reads no table
    settings = replace(SETTINGS, interval_s=600, conversion=conversion)
    return Maintainer("c", "connect-c", tables, settings, metrics(), lambda: names,
                      enabled=lambda table: enabled, clock=lambda: now[0])


def test_tables_are_first_looked_at_one_interval_after_they_are_seen() -> None:
    now, names = [1000.0], {"db.a"}
    maintainer = _maintainer(now, names)
    assert maintainer.due() == []  # a coordinator that just took over catches up first
    now[0] += 599
    names.add("db.b")
    assert maintainer.due() == []
    now[0] += 1
    assert maintainer.due() == ["db.a"]
    now[0] = 1000.0 + 599 + 600
    assert "db.b" in maintainer.due()


def test_a_disabled_maintainer_has_nothing_due() -> None:
    now = [0.0]
    maintainer = _maintainer(now, {"db.a"}, enabled=False)
    now[0] += 10_000
    assert maintainer.due() == []


def test_with_conversion_every_round_every_table_is_due_and_looked_at_by_the_interval() -> None:
    now, names = [1000.0], {"db.a"}
    maintainer = _maintainer(now, names, conversion="round")
    assert maintainer.due() == ["db.a"]  # for a conversion only
    assert not maintainer.look_due("db.a", now[0])
    now[0] += 600
    assert maintainer.due() == ["db.a"] and maintainer.look_due("db.a", now[0])
    assert _maintainer(now, names, enabled=False, conversion="round").due() == []


def test_a_table_another_engine_compacts_is_due_only_at_its_looks_when_the_others_convert_every_round() -> None:
    now, names = [1000.0], {"db.a", "db.ext"}
    settings = replace(SETTINGS, interval_s=600, conversion="commit")
    maintainer = Maintainer("c", "connect-c", None, settings, metrics(), lambda: names,
                            clock=lambda: now[0],
                            table_settings=lambda t: settings.beside_external_compaction() if t == "db.ext"
                            else settings)
    assert maintainer.due() == ["db.a"]  # a round's conversion: never for db.ext, whose rewrites it would fail
    now[0] += 600
    assert maintainer.due() == ["db.a", "db.ext"]


def test_a_run_stops_the_commits_expiry_until_it_ends_and_a_failed_one_says_why() -> None:
    during: list[int] = []

    def disk_gone(*args: object) -> None:
        during.append(maintainer.commit_positions.snapshot_bound("db.t"))
        raise OSError("the warehouse's disk is gone")

    tables: Any = SimpleNamespace(spark=SimpleNamespace(join_job_group=disk_gone))
    maintainer = Maintainer("c", "connect-c", tables, replace(SETTINGS, max_snapshots=17), metrics(),
                            lambda: {"db.t"}, enabled=lambda table: True)
    with pytest.raises(MaintenanceFailed, match=r"^the warehouse's disk is gone$"):
        maintainer._maintain("db.t", 1, True, lambda: True)
    assert during == [0]
    assert maintainer.commit_positions.snapshot_bound("db.t") == 17


@pytest.mark.parametrize("outcome", ["nothing to do", "failed"])
def test_the_next_look_comes_one_interval_after_a_look_ends_however_long_it_took(outcome: str) -> None:
    """Another engine's rewrite started as a look ends has the whole interval before a conversion of ours
    could fail it; counted from the look's start, a 500 s look would leave it 100 s."""
    now, names = [1000.0], {"db.a"}
    maintainer = _maintainer(now, names)
    maintainer.due()
    now[0] += 600

    def a_long_look(name: str, epoch: int, look: bool, keep_going: object) -> None:
        assert look
        now[0] += 500
        if outcome == "failed":
            raise MaintenanceFailed("the catalog is gone")

    maintainer._maintain = a_long_look  # type: ignore[method-assign]  # a look without a table
    try:
        assert maintainer.due() == ["db.a"]
        asyncio.run(maintainer.run(["db.a"], 1, lambda: True))
        ended = now[0]
        now[0] = ended + 599
        assert maintainer.due() == []
        now[0] = ended + 600
        assert maintainer.due() == ["db.a"]
    finally:
        maintainer.close()
