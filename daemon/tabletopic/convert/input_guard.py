"""Bounds a payload must meet before any native parser sees it.

Arrow's JSON reader (RapidJSON) parses nested values recursively on the C stack: one
value nested 100,000 deep ends the process with SIGSEGV, and with it every connector
of the daemon. So JSON text is measured first, with numpy over the raw bytes, and a
value nested deeper than the converter's ``max.nesting.depth`` (1,000 by default, as
Jackson's ``StreamReadConstraints`` bound Connect's own JsonConverter) fails its record
alone, through ``errors.tolerance``.

The check is cheap for the values that matter: a value of ``n`` bytes holds at most
``n`` brackets, so values no longer than the limit are never scanned; longer ones have
their ``[`` and ``{`` counted, and only a value holding more brackets than the limit is
measured exactly, outside its strings. A value too large to convert at all is caught
earlier still, for every converter, by ``tabletopic.input.max-value-bytes`` (``staging.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

_OPEN_SQUARE, _CLOSE_SQUARE, _OPEN_CURLY, _CLOSE_CURLY = 0x5B, 0x5D, 0x7B, 0x7D
_QUOTE, _BACKSLASH = 0x22, 0x5C
_WINDOW = 1 << 20  # bytes measured at once: bounds the scan's memory for a value of any size


class Lines:
    """A batch's payloads joined by newlines once, with each one's length and start: what the guards and
    Arrow's JSON reader read, without a Python step per value."""

    def __init__(self, payloads: Sequence[bytes]) -> None:
        self.count = len(payloads)
        self.joined = b"\n".join(payloads)
        self.lengths = np.fromiter(map(len, payloads), dtype=np.int64, count=self.count)
        self.starts = np.zeros(self.count, dtype=np.int64)
        if self.count > 1:
            np.cumsum(self.lengths[:-1] + 1, out=self.starts[1:])

    def one_line_objects(self) -> bool:
        """Whether every payload is an object on one line, all Arrow's reader may be given: a newline
        would cut a value in two, and a buffer holding only non-objects (nulls) crashes it."""
        if not self.count or not self.lengths.all():
            return False
        if self.joined.count(b"\n") != self.count - 1 or b"\r" in self.joined:
            return False
        return bool((np.frombuffer(self.joined, dtype=np.uint8)[self.starts] == _OPEN_CURLY).all())


def too_deep(payloads: Sequence[bytes], limit: int, skip: int = 0,
             setting: str = "value.converter.max.nesting.depth", lengths: np.ndarray | None = None) -> dict[int, str]:
    """The positions of ``payloads`` nested deeper than ``limit``, each with the reason to report,
    which names ``setting``.

    ``skip`` bytes at the start of each payload are not JSON (a Schema Registry header). ``lengths``,
    the payloads' lengths if known already.
    """
    if lengths is None:
        lengths = np.fromiter(map(len, payloads), dtype=np.int64, count=len(payloads))
    found: dict[int, str] = {}
    # A payload no longer than the limit cannot hold more brackets than bytes.
    for i in np.flatnonzero(lengths - skip > limit).tolist():
        payload = payloads[i]
        if payload.count(b"[", skip) + payload.count(b"{", skip) <= limit:
            continue
        depth = nesting_depth(memoryview(payload)[skip:], stop_above=limit)
        if depth > limit:
            found[i] = (f"JSON nested deeper than {limit} levels ({setting}={limit}); "
                        "no parser is given it, as parsing it would overflow the stack")
    return found


def nesting_depth(text: bytes | memoryview, stop_above: int | None = None, window_bytes: int = _WINDOW) -> int:
    """The deepest nesting of ``[`` and ``{`` outside JSON strings in ``text``.

    Works on bytes that are not valid JSON too: it then measures what a parser would have
    descended into before it failed, or more. With ``stop_above``, it returns as soon as the
    depth passes that, with the depth found so far.
    """
    data = np.frombuffer(text, dtype=np.uint8)
    depth = deepest = 0
    in_string = False
    backslashes = 0  # the run of backslashes that ends the window before
    for start in range(0, len(data), window_bytes):
        window = data[start:start + window_bytes]
        quotes = _unescaped_quotes(window, backslashes)
        brackets = np.flatnonzero((window == _OPEN_SQUARE) | (window == _CLOSE_SQUARE)
                                  | (window == _OPEN_CURLY) | (window == _CLOSE_CURLY))
        if len(brackets):
            # A bracket is inside a string when an odd number of quotes (with the state carried in)
            # come before it.
            before = np.searchsorted(quotes, brackets) + int(in_string)
            outside = brackets[(before & 1) == 0]
            opening = (window[outside] == _OPEN_SQUARE) | (window[outside] == _OPEN_CURLY)
            steps = np.where(opening, 1, -1).astype(np.int64)
            if len(steps):
                levels = np.cumsum(steps) + depth
                deepest = max(deepest, int(levels.max()))
                depth = int(levels[-1])
        in_string ^= bool(len(quotes) & 1)
        backslashes = _trailing_backslashes(window, backslashes)
        if stop_above is not None and deepest > stop_above:
            break
    return deepest


def _unescaped_quotes(window: np.ndarray, carried: int) -> np.ndarray:
    """Positions of the ``"`` in ``window`` that are not escaped (an even run of backslashes before
    them); ``carried`` backslashes end the window before."""
    quotes = np.flatnonzero(window == _QUOTE)
    slashes = np.flatnonzero(window == _BACKSLASH)
    if not len(quotes) or (not len(slashes) and not carried):
        return quotes
    runs = _run_lengths(slashes, carried)
    # The backslash just before each quote, if there is one, and the length of its run up to there.
    at = np.searchsorted(slashes, quotes - 1)
    hit = at < len(slashes)
    hit[hit] = slashes[at[hit]] == quotes[hit] - 1
    run = np.zeros(len(quotes), dtype=np.int64)
    run[hit] = runs[at[hit]]
    run[(quotes == 0)] = carried  # a quote first in the window: the run is the carried one
    return quotes[(run & 1) == 0]


def _run_lengths(slashes: np.ndarray, carried: int) -> np.ndarray:
    """For each backslash position, how many backslashes end at it without a break (itself included)."""
    breaks = np.ones(len(slashes), dtype=bool)
    breaks[1:] = np.diff(slashes) != 1
    starts = np.flatnonzero(breaks)
    first_of_run = starts[np.cumsum(breaks) - 1]
    lengths = np.arange(len(slashes)) - first_of_run + 1
    if len(slashes) and slashes[0] == 0:
        lengths[: (starts[1] if len(starts) > 1 else len(slashes))] += carried
    return lengths


def _trailing_backslashes(window: np.ndarray, carried: int) -> int:
    if not len(window) or window[-1] != _BACKSLASH:
        return 0
    not_slash = np.flatnonzero(window != _BACKSLASH)
    if not len(not_slash):
        return carried + len(window)
    return len(window) - 1 - int(not_slash[-1])


def not_utf8(payloads: Sequence[bytes], lines: Lines | None = None) -> dict[int, str]:
    """The positions of ``payloads`` that are not UTF-8, each with its reason.

    JSON text is UTF-8, and Jackson refuses anything else; Arrow's JSON reader does not check
    string values, and a key that is not UTF-8 breaks every later use of its column's name. The
    whole batch is checked at once (Arrow's validation, on the joined bytes: ``lines`` if they were
    joined already, each payload then read with the newline after it, which is UTF-8 whatever comes
    before); only a batch that fails is looked at value by value.
    """
    if not payloads:
        return {}
    if lines is None:
        lines = Lines(payloads)
    offsets = np.append(lines.starts, len(lines.joined))
    strings = pa.Array.from_buffers(pa.large_string(), len(payloads),
                                    [None, pa.py_buffer(offsets), pa.py_buffer(lines.joined)])
    try:
        strings.validate(full=True)
        return {}
    except pa.ArrowInvalid:
        pass
    found = {}
    for i, payload in enumerate(payloads):
        try:
            payload.decode("utf-8")
        except UnicodeDecodeError as exc:
            found[i] = f"not valid JSON: not UTF-8 ({exc.reason} at byte {exc.start})"
    return found
