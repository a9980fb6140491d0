"""What counts as a record's fault, and finding the records at fault in a batch that raised.

Stages work on whole batches. When one raises for a record's sake instead of reporting a failure
per record, :func:`bisect` halves the batch until each record that raises is alone: those are bad
records, and the rest go on in batches as large as they can. Only exceptions a record's content can
cause count (:data:`RECORD_ERRORS`: bad values, types, encodings, depth, ranges); anything else (a
network error, the JVM, the catalog) is the system's fault and propagates, so it is never
dead-lettered.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import pyarrow as pa

# ValueError covers json's, base64's (binascii.Error), Unicode errors and Arrow's ArrowInvalid;
# ArithmeticError covers OverflowError and decimal's InvalidOperation.
RECORD_ERRORS: tuple[type[Exception], ...] = (
    ValueError, TypeError, KeyError, IndexError, ArithmeticError, RecursionError,
    pa.ArrowTypeError, pa.ArrowNotImplementedError,
)

R = TypeVar("R")


def bisect(size: int, attempt: Callable[[int, int], R], on_fault: Callable[[int, BaseException], None],
           faults: tuple[type[BaseException], ...] = RECORD_ERRORS) -> list[R]:
    """``attempt(lo, hi)`` on items ``lo`` to ``hi`` of a batch of ``size``, first on the whole batch. Where an
    attempt raises one of ``faults``, each half is attempted, down to single items: ``on_fault(index, exc)``
    is told of each item that raises alone. Returns what the attempts that did not raise returned, in the
    batch's order. An attempt must change nothing before it raises."""

    def attempt_range(lo: int, hi: int) -> list[R]:
        try:
            return [attempt(lo, hi)]
        except faults as exc:
            if hi - lo == 1:
                on_fault(lo, exc)
                return []
            if hi == lo:
                raise
        mid = lo + (hi - lo) // 2
        return [*attempt_range(lo, mid), *attempt_range(mid, hi)]

    return attempt_range(0, size)
