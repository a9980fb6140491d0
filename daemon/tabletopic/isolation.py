"""The one rule for what a record's fault is, and finding the record in a batch that raised.

Stages work on whole batches.  When a stage raises instead of reporting a failure per
record, the batch is split in halves until the records that raise are alone: they are
bad records, the rest go on.  Only exceptions a record's content can cause count
(:data:`RECORD_ERRORS`: bad values, types, encodings, depth, ranges).  Anything else (a
network error, the JVM, the catalog) is the system's fault and is raised as it is, so
it is never dead-lettered.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np
import pyarrow as pa

from tabletopic.convert.converter import Converted, ConvertResult, Failure
from tabletopic.convert.records import SinkRecords

# ValueError covers json's, base64's (binascii.Error), Unicode errors and Arrow's ArrowInvalid;
# ArithmeticError covers OverflowError and decimal's InvalidOperation.
RECORD_ERRORS: tuple[type[BaseException], ...] = (
    ValueError, TypeError, KeyError, IndexError, ArithmeticError, RecursionError,
    pa.ArrowTypeError, pa.ArrowNotImplementedError,
)

class SystemUnavailable(RuntimeError):
    """A system the sink depends on failed (the catalog, storage, a Schema Registry): never a record's
    fault.  The sink waits with backoff and reads the records again; nothing is dead-lettered."""


T = TypeVar("T")


def describe(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text[:500]}"


def convert_isolating(convert: Callable[[Sequence[bytes]], ConvertResult], data: Sequence[bytes]) -> ConvertResult:
    """``convert(data)``; if it raises for a record's sake, each record that raises is a failure."""
    try:
        return convert(data)
    except RECORD_ERRORS as exc:
        if len(data) == 1:
            return ConvertResult(failures=[Failure(0, describe(exc))])
    half = len(data) // 2
    out = ConvertResult()
    for start, piece in ((0, data[:half]), (half, data[half:])):
        result = convert_isolating(convert, piece)
        out.parts += [Converted(p.table, p.indexes + start, p.schemaless, p.primitive) for p in result.parts]
        out.failures += [Failure(f.index + start, f.reason) for f in result.failures]
        out.nulls += [i + start for i in result.nulls]
    return out


def apply_isolating(apply: Callable[[SinkRecords], T], records: SinkRecords,
                    failed: Callable[[int, str], None]) -> list[T]:
    """``apply(records)``, or, if it raises for a record's sake, ``apply`` on the parts that do not;
    ``failed(row, reason)`` is told of each record that raises alone."""
    try:
        return [apply(records)]
    except RECORD_ERRORS as exc:
        if len(records) == 1:
            failed(int(records.rows[0]), describe(exc))
            return []
    half = len(records) // 2
    mask = np.zeros(len(records), dtype=bool)
    mask[:half] = True
    return [*apply_isolating(apply, records.take(mask), failed), *apply_isolating(apply, records.take(~mask), failed)]
