"""Halving a batch until each item that raises is alone: what every stage's isolation builds on."""

from __future__ import annotations

import pytest

from tabletopic.core.record_faults import bisect


def _sum_without(bad: set[int]):  # type: ignore[no-untyped-def]
    calls: list[tuple[int, int]] = []

    def attempt(lo: int, hi: int) -> tuple[int, int]:
        calls.append((lo, hi))
        if bad & set(range(lo, hi)):
            raise ValueError(f"bad among {lo}..{hi}")
        return lo, hi

    return attempt, calls


@pytest.mark.parametrize(("size", "bad"), [(1, set()), (8, set()), (8, {0}), (8, {7}), (9, {3, 4}), (10, {0, 9}),
                                           (5, {0, 1, 2, 3, 4}), (1, {0})])
def test_each_bad_item_alone_and_the_rest_in_order_in_as_few_ranges_as_halving_gives(size: int, bad: set[int]) -> None:
    attempt, calls = _sum_without(bad)
    faults: list[int] = []
    ranges = bisect(size, attempt, lambda i, exc: faults.append(i))
    assert faults == sorted(bad)
    covered = [i for lo, hi in ranges for i in range(lo, hi)]
    assert covered == [i for i in range(size) if i not in bad]  # every good item once, in order
    assert calls[0] == (0, size)
    if not bad:
        assert ranges == [(0, size)] and len(calls) == 1


def test_an_error_that_is_no_records_fault_propagates_at_once() -> None:
    calls = []

    def attempt(lo: int, hi: int) -> None:
        calls.append((lo, hi))
        raise ConnectionError("the catalog")

    with pytest.raises(ConnectionError):
        bisect(8, attempt, lambda i, exc: None)
    assert calls == [(0, 8)]


def test_faults_names_what_counts() -> None:
    class Misfit(Exception):
        pass

    def attempt(lo: int, hi: int) -> int:
        if lo <= 2 < hi:
            raise Misfit("row 2")
        return hi - lo

    told: list[tuple[int, str]] = []
    assert sum(bisect(4, attempt, lambda i, exc: told.append((i, str(exc))), faults=(Misfit,))) == 3
    assert told == [(2, "row 2")]
    with pytest.raises(Misfit):
        bisect(4, attempt, lambda i, exc: None)  # not a record's fault by the default rule
