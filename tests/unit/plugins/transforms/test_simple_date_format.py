"""SimpleDateFormat in UTC, lenient: the facts of Java's formatting and reading that the transforms rely on."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tabletopic_plugins.transforms.simple_date_format import SimpleDateFormat, civil_from_days, days_from_civil
from tests.unit.fuzzing import examples


def ms(*args: int) -> int:
    return int(dt.datetime(*args, tzinfo=dt.UTC).timestamp() * 1000)  # type: ignore[misc]


# (pattern, instant in ms, Java's text)
FORMATTED = [
    ("yyyy-MM-dd'T'HH:mm:ss.SSS'Z'", ms(2023, 11, 14, 22, 13, 20) + 123, "2023-11-14T22:13:20.123Z"),
    ("yyyyMMdd", ms(2024, 1, 5), "20240105"),
    ("yy-M-d H:m:s.S", ms(2024, 1, 5, 3, 4, 5) + 7, "24-1-5 3:4:5.7"),
    ("EEE, d MMM yyyy HH:mm:ss Z", 0, "Thu, 1 Jan 1970 00:00:00 +0000"),
    ("EEEE MMMM", 0, "Thursday January"),
    ("h:mm a", ms(2024, 1, 5, 0, 30), "12:30 AM"),
    ("K:mm a, k", ms(2024, 1, 5, 12, 30), "0:30 PM, 12"),
    ("D F u", ms(2024, 12, 31), "366 5 2"),
    ("w W", ms(2023, 11, 14), "46 3"),
    ("w YYYY", ms(2024, 12, 29), "1 2025"),  # the week of 1 January 2025, in the US weeks
    ("z zzzz X XXX", 0, "UTC Coordinated Universal Time Z Z"),
    ("'o''clock' ''", 0, "o'clock '"),
    ("yyyy G", ms(1, 1, 1) - 86_400_000 * 366, "0001 BC"),
    ("SSSS", 5, "0005"),
]


@pytest.mark.parametrize(("pattern", "millis", "text"), FORMATTED)
def test_format(pattern: str, millis: int, text: str) -> None:
    assert SimpleDateFormat(pattern).format(np.array([millis])).to_pylist() == [text]


# (pattern, text, instant in ms or None where Java's parse throws)
READ = [
    ("yyyy-MM-dd HH:mm:ss", "2024-01-05 03:04:05", ms(2024, 1, 5, 3, 4, 5)),
    ("yyyy-MM-dd HH:mm:ss", "2024-1-5 3:04:05", ms(2024, 1, 5, 3, 4, 5)),  # fewer digits
    ("yyyy-MM-dd HH:mm:ss", " 2024-01-05 03:04:05", ms(2024, 1, 5, 3, 4, 5)),  # spaces before a number
    ("yyyy-MM-dd", "2024-01-05T10:00:00Z", ms(2024, 1, 5)),  # text after the pattern is ignored
    ("yyyy-MM-dd", "2024-13-01", ms(2025, 1, 1)),  # lenient roll-over
    ("yyyy-MM-dd", "2024-02-30", ms(2024, 3, 1)),
    ("yyyy-MM-dd HH", "2024-01-05 25", ms(2024, 1, 6, 1)),
    ("yyyyMMdd", "20240105", ms(2024, 1, 5)),  # abutting numbers take their widths
    ("yyyy.MM.dd HH:mm:ss.SSS", "2024.01.05 00:00:00.5", ms(2024, 1, 5) + 5),  # S counts milliseconds
    ("yyyy.MM.dd HH:mm:ss.SSS", "2024.01.05 00:00:00.123456", ms(2024, 1, 5) + 123456),
    ("dd MMM yyyy", "05 jan 2024", ms(2024, 1, 5)),
    ("dd MMM yyyy", "05 January 2024", ms(2024, 1, 5)),
    ("EEE, dd MMM yyyy", "Fri, 05 Jan 2024", ms(2024, 1, 5)),
    ("hh:mm a", "12:30 PM", ms(1970, 1, 1, 12, 30)),
    ("hh:mm a", "12:30 am", ms(1970, 1, 1, 0, 30)),
    ("yyyy-MM-dd HH:mm Z", "2024-01-05 10:00 +0100", ms(2024, 1, 5, 9)),
    ("yyyy-MM-dd HH:mm XXX", "2024-01-05 10:00 -05:30", ms(2024, 1, 5, 15, 30)),
    ("yyyy-MM-dd HH:mm X", "2024-01-05 10:00 Z", ms(2024, 1, 5, 10)),
    ("yyyy-MM-dd HH:mm z", "2024-01-05 10:00 GMT+02:00", ms(2024, 1, 5, 8)),
    ("yyyy-MM-dd HH:mm z", "2024-01-05 10:00 UTC", ms(2024, 1, 5, 10)),
    ("yyyy-MM-dd", "05-01-2024", ms(5, 1, 1) + 2023 * 86_400_000),  # year 5, day 2024 of January
    ("yyyy-MM-dd", "x2024-01-05", None),
    ("yyyy-MM-dd", "2024/01/05", None),
    ("yyyy-MM-dd", "", None),
]


@pytest.mark.parametrize(("pattern", "text", "expected"), READ)
def test_parse(pattern: str, text: str, expected: int | None) -> None:
    millis, ok = SimpleDateFormat(pattern).parse(pa.array([text]))
    assert bool(ok[0]) == (expected is not None)
    if expected is not None:
        assert int(millis[0]) == expected


def test_two_digit_years_fall_in_the_century_starting_80_years_back() -> None:
    fmt = SimpleDateFormat("yy-MM-dd", now=dt.datetime(2026, 11, 28, tzinfo=dt.UTC))
    millis, ok = fmt.parse(pa.array(["45-01-01", "47-01-01", "2045-01-01"]))
    years = [dt.datetime.fromtimestamp(m / 1000, dt.UTC).year for m in millis]
    assert ok.all() and years == [2045, 1947, 2045]


@pytest.mark.parametrize(("pattern", "error"), [("yyyy-MM-dd'T", "Unterminated quote"),
                                                ("yyyy-MM-ddTHH", "Illegal pattern character 'T'"),
                                                ("bb", "Illegal pattern character 'b'")])
def test_patterns_java_refuses(pattern: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        SimpleDateFormat(pattern)


@settings(max_examples=examples(200), deadline=None)
@given(st.integers(min_value=-(10**13), max_value=10**14))
def test_what_is_formatted_reads_back(millis: int) -> None:
    fmt = SimpleDateFormat("yyyy-MM-dd'T'HH:mm:ss.SSS")
    text = fmt.format(np.array([millis]))
    back, ok = fmt.parse(text)
    if millis >= -62_135_596_800_000:  # from year 1: yyyy prints the year of era
        assert ok[0] and int(back[0]) == millis


@settings(max_examples=examples(200), deadline=None)
@given(st.integers(min_value=-10**7, max_value=10**7))
def test_civil_days_round_trip(days: int) -> None:
    year, month, day = civil_from_days(np.array([days]))
    assert int(days_from_civil(year, month, day)[0]) == days
    if -700_000 < days < 2_900_000:
        expected = dt.date(1970, 1, 1) + dt.timedelta(days=days)
        assert (int(year[0]), int(month[0]), int(day[0])) == (expected.year, expected.month, expected.day)


@pytest.mark.parametrize("pattern", sorted({p for p, _, _ in READ} | {"yyyy-MM-dd'T'HH:mm:ss'Z'", "dd/MM/yyyy"}))
def test_a_pattern_of_fixed_widths_reads_as_the_lenient_rules_read(pattern: str) -> None:
    # Exact widths and real dates go through strptime; every other text through the rules, as before.
    texts = [t for p, t, _ in READ] + ["2024-01-05T10:00:00Z", "2024-02-30T10:00:00Z", "2024-01-05T24:00:00Z",
                                       "2024-02-29T23:59:59Z", "05/01/2024", "31/02/2024", "0001-01-01T00:00:00Z",
                                       "9999-12-31T23:59:59Z", "%Y-01-05"]
    column = pa.array([*texts, None])
    date_format = SimpleDateFormat(pattern)
    millis, ok = date_format.parse(column)
    want_millis, want_ok = date_format._parse_lenient(column)
    assert ok.tolist() == want_ok.tolist()
    assert millis[ok].tolist() == want_millis[want_ok].tolist()
