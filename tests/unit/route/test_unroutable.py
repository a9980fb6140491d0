"""Skipped records: counted by why, told once per table name, and a missing table asked for again after a round."""

from __future__ import annotations

from typing import Any

from tabletopic.route.unroutable import Unroutable
from tests.unit.fakes import metrics


class Log:
    def __init__(self) -> None:
        self.lines: list[tuple[str, dict[str, Any]]] = []

    def warning(self, event: str, **fields: Any) -> None:
        self.lines.append((event, fields))


def skipped(m: Any, reason: str) -> float:
    return m.skipped_records.labels(reason=reason)._value.get()


def test_each_missing_table_and_the_missing_route_are_told_once_and_every_record_counted() -> None:
    log, m = Log(), metrics()
    unroutable = Unroutable(m, log, "db", recheck_s=5)
    for _ in range(3):
        unroutable.no_route(2)
        unroutable.no_table("a.gone", 4)
    unroutable.no_table("b.gone", 1)
    assert skipped(m, "no_route") == 6 and skipped(m, "no_table") == 13
    assert [fields.get("table") for _, fields in log.lines] == [None, "a.gone", "b.gone"]


def test_a_missing_table_is_taken_as_missing_for_one_recheck_interval() -> None:
    now = [100.0]
    unroutable = Unroutable(metrics(), Log(), "db", recheck_s=5, clock=lambda: now[0])
    assert not unroutable.known_missing("a.gone")
    unroutable.no_table("a.gone", 1)
    now[0] = 104.9
    assert unroutable.known_missing("a.gone")
    now[0] = 105.0
    assert not unroutable.known_missing("a.gone")  # asked again, as Java's writers are each commit
