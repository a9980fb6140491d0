"""Java's ``SimpleDateFormat`` in UTC, over whole columns: what TimestampConverter, TimestampRouter and Cast
print and read.

Connect's transforms format and parse with a ``SimpleDateFormat`` set to UTC, in its default (lenient)
mode, and these facts of it hold here:

* Pattern letters are Java's (``G y Y M L w W D d F E u a H k K h m s S z Z X``); any other unquoted
  ASCII letter is refused, as is an unterminated quote. ``''`` is a quote; ``'text'`` is literal.
* Numbers are zero-padded to the letter count; ``yy`` prints two digits of the year. ``S`` is the
  millisecond count, not a fraction: ``S`` prints 5 ms as ``5`` and reads ``5`` as 5 ms.
* Reading skips spaces and tabs before a number; a number followed by another number field (``yyyyMMdd``)
  takes at most its letter count of digits, otherwise all digits there are. ``yy`` reads a two-digit year
  into the century that starts 80 years before now. Month and day names match in any case, long or short.
* Lenient: a field out of range rolls over (month 13 is January of the next year, 30 February is 1 or 2
  March), and text after the pattern is ignored. Text that does not match from its start fails.
* The Julian calendar Java uses before 15 October 1582 is not used: dates are proleptic Gregorian.

Parsing compiles the pattern to one regular expression and does the arithmetic column-wise.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

DAY_MS = 86_400_000
_LETTERS = set("GyYMLwWDdFEuaHkKhmsSzZX")
_NUMERIC = set("yYdHkKhmsSDFwWu")  # always numbers; M and L are numbers below three letters
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]
DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]  # Calendar's order
_SPECIAL = set("\\.^$|?*+()[]{}")


@dataclass(frozen=True)
class Letter:
    char: str
    count: int

    @property
    def numeric(self) -> bool:
        return self.char in _NUMERIC or (self.char in "ML" and self.count < 3)


Token = str | Letter


def compile_pattern(pattern: str) -> list[Token]:
    """The pattern's letters and literal text, as ``SimpleDateFormat.applyPattern`` reads it; ValueError for
    what Java refuses."""
    tokens: list[Token] = []
    literal: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "'":
            if i + 1 < n and pattern[i + 1] == "'":
                literal.append("'")
                i += 2
                continue
            end = i + 1
            text: list[str] = []
            while True:
                if end >= n:
                    raise ValueError(f"Unterminated quote in pattern {pattern!r}")
                if pattern[end] == "'":
                    if end + 1 < n and pattern[end + 1] == "'":
                        text.append("'")
                        end += 2
                        continue
                    break
                text.append(pattern[end])
                end += 1
            literal.extend(text)
            i = end + 1
            continue
        if ("a" <= c <= "z") or ("A" <= c <= "Z"):
            if c not in _LETTERS:
                raise ValueError(f"Illegal pattern character '{c}' in pattern {pattern!r}")
            run = i
            while run < n and pattern[run] == c:
                run += 1
            if literal:
                tokens.append("".join(literal))
                literal = []
            tokens.append(Letter(c, run - i))
            i = run
            continue
        literal.append(c)
        i += 1
    if literal:
        tokens.append("".join(literal))
    return tokens


# -- calendar arithmetic, column-wise (proleptic Gregorian) ----------------------------------------
def days_from_civil(year: np.ndarray, month: np.ndarray, day: np.ndarray) -> np.ndarray:
    y = year - (month <= 2)
    era = np.floor_divide(y, 400)
    yoe = y - era * 400
    mp = (month + 9) % 12
    doy = (153 * mp + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def civil_from_days(days: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    z = days + 719468
    era = np.floor_divide(z, 146097)
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = np.where(mp < 10, mp + 3, mp - 9)
    year = yoe + era * 400 + (month <= 2)
    return year, month, day


# -- formatting ------------------------------------------------------------------------------------
class _Parts:
    """The calendar fields of instants (epoch milliseconds), in UTC."""

    def __init__(self, millis: np.ndarray) -> None:
        self.days = np.floor_divide(millis, DAY_MS)
        of_day = millis - self.days * DAY_MS
        self.year, self.month, self.day = civil_from_days(self.days)
        self.hour = of_day // 3_600_000
        self.minute = of_day // 60_000 % 60
        self.second = of_day // 1000 % 60
        self.milli = of_day % 1000
        self.weekday = (self.days + 4) % 7  # 0 = Sunday: 1970-01-01 was a Thursday
        self.day_of_year = self.days - days_from_civil(self.year, np.ones_like(self.year),
                                                       np.ones_like(self.year)) + 1

    def year_of_era(self, year: np.ndarray) -> np.ndarray:
        return np.where(year > 0, year, 1 - year)

    def week_year(self) -> np.ndarray:
        # Week-based year with weeks from Sunday, and week 1 the one holding 1 January (Locale.US).
        saturday = self.days - self.weekday + 6
        return np.where(civil_from_days(saturday)[0] > self.year, self.year + 1, self.year)

    def week_of_year(self) -> np.ndarray:
        jan1 = days_from_civil(self.year, np.ones_like(self.year), np.ones_like(self.year))
        week = (self.day_of_year - 1 + (jan1 + 4) % 7) // 7 + 1
        return np.where(self.week_year() > self.year, 1, week)

    def week_of_month(self) -> np.ndarray:
        first = days_from_civil(self.year, self.month, np.ones_like(self.day))
        return (self.day - 1 + (first + 4) % 7) // 7 + 1


def _number(values: np.ndarray, count: int) -> pa.Array:
    text = pc.cast(pa.array(values, pa.int64()), pa.string())
    return pc.utf8_lpad(text, width=count, padding="0") if count > 1 else text


def _names(values: np.ndarray, names: list[str]) -> pa.Array:
    return pc.take(pa.array(names, pa.string()), pa.array(values, pa.int64()))


def _format_letter(letter: Letter, parts: _Parts) -> pa.Array | str:
    c, count = letter.char, letter.count
    if c == "G":
        return pc.if_else(pa.array(parts.year > 0), "AD", "BC")
    if c in "yY":
        year = parts.year_of_era(parts.year if c == "y" else parts.week_year())
        return _number(year % 100, 2) if count == 2 else _number(year, count)
    if c in "ML":
        if count >= 4:
            return _names(parts.month - 1, MONTHS)
        if count == 3:
            return _names(parts.month - 1, [m[:3] for m in MONTHS])
        return _number(parts.month, count)
    if c == "E":
        return _names(parts.weekday, DAYS if count >= 4 else [d[:3] for d in DAYS])
    if c == "a":
        return pc.if_else(pa.array(parts.hour < 12), "AM", "PM")
    if c in "zZX":
        # Always UTC: Connect's formats are set to it.
        return ("Coordinated Universal Time" if count >= 4 else "UTC") if c == "z" else "+0000" if c == "Z" else "Z"
    values = {
        "d": parts.day, "H": parts.hour, "k": np.where(parts.hour == 0, 24, parts.hour), "K": parts.hour % 12,
        "h": np.where(parts.hour % 12 == 0, 12, parts.hour % 12), "m": parts.minute, "s": parts.second,
        "S": parts.milli, "D": parts.day_of_year, "F": (parts.day - 1) // 7 + 1,
        "u": np.where(parts.weekday == 0, 7, parts.weekday),
    }
    if c == "w":
        return _number(parts.week_of_year(), count)
    if c == "W":
        return _number(parts.week_of_month(), count)
    return _number(values[c], count)


# -- parsing ---------------------------------------------------------------------------------------
def _escape(text: str) -> str:
    return "".join("\\" + c if c in _SPECIAL else c for c in text)


def _alternatives(names: list[str]) -> str:
    return "(?i:" + "|".join(_escape(n) for n in sorted(set(names), key=len, reverse=True)) + ")"


_ZONE = r"GMT[+-]\d{1,2}(?::?\d{2})?|UTC|GMT|UT|[+-]\d{4}"


def _zone_regex(letter: Letter) -> str:
    if letter.char == "X":
        return {1: r"Z|[+-]\d{2}", 2: r"Z|[+-]\d{4}"}.get(letter.count, r"Z|[+-]\d{2}:\d{2}")
    return _ZONE


def zone_offset_ms(text: str) -> int:
    """The offset a time-zone field read names, in milliseconds east of UTC."""
    if text in ("Z", "UTC", "GMT", "UT"):
        return 0
    body = text[3:] if text.startswith("GMT") else text
    sign = -1 if body[0] == "-" else 1
    digits = body[1:].replace(":", "")
    if len(digits) <= 2 and not text.startswith("GMT"):
        hours, minutes = int(digits), 0
    elif text.startswith("GMT") and ":" in body:
        hours, minutes = int(body[1:].split(":")[0]), int(body.split(":")[1])
    elif text.startswith("GMT") and len(digits) <= 2:
        hours, minutes = int(digits), 0
    else:
        hours, minutes = int(digits[:-2]), int(digits[-2:])
    return sign * (hours * 60 + minutes) * 60_000


class SimpleDateFormat:
    def __init__(self, pattern: str, now: dt.datetime | None = None) -> None:
        self.pattern = pattern
        self.tokens = compile_pattern(pattern)
        # Two-digit years fall in the hundred years that start 80 years before now, as Java's do.
        start = (now or dt.datetime.now(dt.UTC)).year - 80
        self._century_start = start
        self._regex, self._groups = self._parse_regex()
        self._strptime = self._strptime_form()

    # Formatting
    def format(self, millis: np.ndarray) -> pa.Array:
        """Each instant (epoch milliseconds) as text."""
        millis = np.asarray(millis, dtype=np.int64)
        if not len(millis):
            return pa.array([], pa.string())
        parts = _Parts(millis)
        pieces = [t if isinstance(t, str) else _format_letter(t, parts) for t in self.tokens]
        if not pieces:
            return pa.array([""] * len(millis), pa.string())
        arrays = [pa.array(np.full(len(millis), p, dtype=object), pa.string()) if isinstance(p, str) else p
                  for p in pieces]
        if len(arrays) == 1:
            return arrays[0]
        return pc.binary_join_element_wise(*arrays, "")

    # Parsing
    def _parse_regex(self) -> tuple[str, list[Letter]]:
        regex, groups = ["^"], []
        for i, token in enumerate(self.tokens):
            if isinstance(token, str):
                regex.append(_escape(token))
                continue
            groups.append(token)
            name = f"g{len(groups) - 1}"
            if token.numeric:
                after = self.tokens[i + 1] if i + 1 < len(self.tokens) else None
                abutting = isinstance(after, Letter) and after.numeric
                digits = rf"\d{{1,{token.count}}}" if abutting else r"\d+"
                regex.append(rf"[ \t]*(?P<{name}>{digits})")
            elif token.char in "ML":
                regex.append(f"(?P<{name}>{_alternatives(MONTHS + [m[:3] for m in MONTHS])})")
            elif token.char == "E":
                regex.append(f"(?P<{name}>{_alternatives(DAYS + [d[:3] for d in DAYS])})")
            elif token.char == "a":
                regex.append(f"(?P<{name}>(?i:AM|PM))")
            elif token.char == "G":
                regex.append(f"(?P<{name}>(?i:AD|BC))")
            else:
                regex.append(f"(?P<{name}>{_zone_regex(token)})")
        return "".join(regex), groups

    def _strptime_form(self) -> tuple[str, str] | None:
        """A pattern of fixed-width numbers and literals only (``yyyy-MM-dd'T'HH:mm:ss'Z'``, the usual kind), as
        a strptime format and the exact shape of the text it reads; None for any other pattern."""
        fields = {("y", 4): ("%Y", r"\d{4}"), ("M", 2): ("%m", r"\d{2}"), ("d", 2): ("%d", r"\d{2}"),
                  ("H", 2): ("%H", r"\d{2}"), ("m", 2): ("%M", r"\d{2}"), ("s", 2): ("%S", r"\d{2}")}
        form, shape = [], ["^"]
        for token in self.tokens:
            if isinstance(token, str):
                form.append(token.replace("%", "%%"))
                shape.append(_escape(token))
            elif (token.char, token.count) in fields:
                directive, digits = fields[(token.char, token.count)]
                form.append(directive)
                shape.append(digits)
            else:
                return None
        return "".join(form), "".join(shape) + "$"

    def parse(self, text: pa.Array) -> tuple[np.ndarray, np.ndarray]:
        """Epoch milliseconds of each string, and which strings were read (nulls are not)."""
        if self._strptime is None:
            return self._parse_lenient(text)
        # Text of exactly the pattern's widths that names a real date and time reads the same through Arrow's
        # strptime, at a fraction of the cost; the rest (a month 13 that rolls over, spaces, other widths) is
        # read by the lenient rules below.
        form, shape = self._strptime
        parsed = pc.strptime(text, format=form, unit="ms", error_is_null=True)
        fast = pc.and_(pc.fill_null(pc.match_substring_regex(text, shape), False), pc.is_valid(parsed))
        fast_np = np.asarray(fast.to_numpy(zero_copy_only=False), dtype=bool)
        millis = np.array(pc.fill_null(parsed.cast(pa.int64()), 0).to_numpy(zero_copy_only=False), dtype=np.int64)
        if fast_np.all():
            return millis, fast_np
        rest = np.flatnonzero(~fast_np)
        slow, slow_ok = self._parse_lenient(text.take(pa.array(rest)))
        millis[rest], ok = slow, fast_np.copy()
        ok[rest] = slow_ok
        return millis, ok

    def _parse_lenient(self, text: pa.Array) -> tuple[np.ndarray, np.ndarray]:
        n = len(text)
        if not self._groups:
            matched = pc.fill_null(pc.starts_with(text, "".join(t for t in self.tokens if isinstance(t, str))), False)
            ok = np.asarray(matched.to_numpy(zero_copy_only=False), dtype=bool)
            return np.zeros(n, dtype=np.int64), ok
        found = pc.extract_regex(text, self._regex)
        ok = np.asarray(pc.fill_null(found.is_valid(), False).to_numpy(zero_copy_only=False), dtype=bool)
        found = found.filter(pa.array(ok))
        m = int(ok.sum())
        year, month, day = np.full(m, 1970, np.int64), np.ones(m, np.int64), np.ones(m, np.int64)
        hour, minute, second, milli = (np.zeros(m, np.int64) for _ in range(4))
        offset = np.zeros(m, np.int64)
        pm: np.ndarray | None = None
        half_hour: npt.NDArray[np.int64] | None = None
        day_of_year: np.ndarray | None = None
        bc: np.ndarray | None = None
        has_day = False
        too_long = np.zeros(m, dtype=bool)
        for index, letter in enumerate(self._groups):
            column = pc.struct_field(found, [index])
            if letter.numeric:
                long = np.asarray(pc.greater(pc.utf8_length(column), 18).to_numpy(zero_copy_only=False), dtype=bool)
                too_long |= long
                values = np.asarray(pc.cast(pc.if_else(pa.array(long), "0", column), pa.int64())
                                    .to_numpy(zero_copy_only=False), dtype=np.int64)
                if letter.char == "y" and letter.count <= 2:
                    two = np.asarray(pc.equal(pc.utf8_length(column), 2).to_numpy(zero_copy_only=False), dtype=bool)
                    values = np.where(two, self._two_digit_year(values), values)
                if letter.char == "y":
                    year = values
                elif letter.char == "Y":
                    year = values  # the week year stands for the year when nothing finer is given
                elif letter.char in "ML":
                    month = values
                elif letter.char == "d":
                    day, has_day = values, True
                elif letter.char == "H":
                    hour = values
                elif letter.char == "k":
                    hour = np.where(values == 24, 0, values)
                elif letter.char in "hK":
                    half_hour = np.where(values == 12, 0, values) if letter.char == "h" else values
                elif letter.char == "m":
                    minute = values
                elif letter.char == "s":
                    second = values
                elif letter.char == "S":
                    milli = values
                elif letter.char == "D":
                    day_of_year = values
            elif letter.char in "ML":
                lowered = pc.utf8_lower(column)
                month = np.zeros(m, np.int64)
                for number, name in enumerate(MONTHS, start=1):
                    hit = pc.or_(pc.equal(lowered, name.lower()), pc.equal(lowered, name[:3].lower()))
                    month = np.where(np.asarray(hit.to_numpy(zero_copy_only=False), dtype=bool), number, month)
            elif letter.char == "a":
                pm = np.asarray(pc.equal(pc.utf8_upper(column), "PM").to_numpy(zero_copy_only=False), dtype=bool)
            elif letter.char == "G":
                bc = np.asarray(pc.equal(pc.utf8_upper(column), "BC").to_numpy(zero_copy_only=False), dtype=bool)
            elif letter.char in "zZX":
                unique = pc.unique(column).to_pylist()
                offsets = {u: zone_offset_ms(u) for u in unique}
                offset = np.asarray([offsets[v] for v in column.to_pylist()], dtype=np.int64)
        if half_hour is not None:
            hour = half_hour + (np.where(pm, 12, 0) if pm is not None else 0)
        elif pm is not None:
            hour = np.where(pm & (hour < 12), hour + 12, hour)
        if bc is not None:
            year = np.where(bc, 1 - year, year)
        if day_of_year is not None and not has_day:
            days = days_from_civil(year, np.ones_like(year), np.ones_like(year)) + day_of_year - 1
        else:
            # Lenient: months past 12 roll into the next years, days past the month's end into the next months.
            months = month - 1
            days = days_from_civil(year + np.floor_divide(months, 12), months % 12 + 1, np.ones_like(year)) + day - 1
        millis = days * DAY_MS + hour * 3_600_000 + minute * 60_000 + second * 1000 + milli - offset
        out = np.zeros(n, dtype=np.int64)
        out[ok] = millis
        good = ok.copy()
        good[np.flatnonzero(ok)[too_long]] = False
        return out, good

    def _two_digit_year(self, values: np.ndarray) -> np.ndarray:
        start = self._century_start
        base = start // 100 * 100
        year = base + values
        return np.where(year < start, year + 100, year)
