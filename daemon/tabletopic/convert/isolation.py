"""Isolating the records at fault in a stage's batch: its converters' and its transforms' and
routing's, by :mod:`tabletopic.core.record_faults`' rule."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from tabletopic.convert.converter import Converted, ConvertResult, Failure
from tabletopic.convert.records import SinkRecords
from tabletopic.core.record_faults import bisect


class SystemUnavailable(RuntimeError):
    """A system the sink depends on failed (the catalog, storage, a Schema Registry): never a record's
    fault.  The sink waits with backoff and reads the records again; nothing is dead-lettered."""


T = TypeVar("T")


def describe(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text[:500]}"


def convert_isolating(convert: Callable[[Sequence[bytes]], ConvertResult], data: Sequence[bytes]) -> ConvertResult:
    """``convert(data)``; if it raises for a record's sake, each record that raises is a failure."""
    whole = len(data)
    out = ConvertResult()

    def attempt(lo: int, hi: int) -> tuple[int, ConvertResult]:
        return lo, convert(data) if (lo, hi) == (0, whole) else convert(data[lo:hi])

    results = bisect(whole, attempt, lambda i, exc: out.failures.append(Failure(i, describe(exc))))
    if len(results) == 1 and not out.failures:
        return results[0][1]  # the usual batch, as the converter gave it
    for start, result in results:  # each counts from the start of its range
        out.parts += [Converted(p.table, p.indexes + start, p.schemaless, p.primitive) for p in result.parts]
        out.failures += [Failure(f.index + start, f.reason) for f in result.failures]
        out.nulls += [i + start for i in result.nulls]
    out.failures.sort(key=lambda f: f.index)
    return out


def apply_isolating(apply: Callable[[SinkRecords], T], records: SinkRecords,
                    failed: Callable[[int, str], None]) -> list[T]:
    """``apply(records)``, or, if it raises for a record's sake, ``apply`` on the parts that do not;
    ``failed(row, reason)`` is told of each record that raises alone."""
    return bisect(len(records), lambda lo, hi: apply(records.between(lo, hi)),
                  lambda i, exc: failed(int(records.rows[i]), describe(exc)))
