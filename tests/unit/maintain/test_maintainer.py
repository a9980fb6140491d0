"""When the maintainer looks at tables: one interval after it first sees them, then every interval."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tabletopic.maintain.maintainer import Maintainer
from tests.unit.fakes import metrics
from tests.unit.maintain.test_plan import SETTINGS


def _maintainer(now: list[float], names: set[str], enabled: bool = True) -> Maintainer:
    tables: Any = None  # due() reads no table
    return Maintainer("c", "connect-c", tables, replace(SETTINGS, interval_s=600), metrics(), lambda: names,
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
