"""Values into columns of another type, as the Iceberg Kafka Connect sink converts them.

The cases are the Java sink's own (``TestRecordConverter`` of apache/iceberg, and ``RecordConverter``'s
rules), taken as facts: each input, the column's type, and what Java stores.
"""

from __future__ import annotations

from datetime import date, datetime, timezone
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from tabletopic.write.column_conversion import (
    ConversionRules,
    ValueConversionError,
    convert,
    converts,
)

TSZ = pa.timestamp("us", tz="UTC")
TS = pa.timestamp("us")
UTC = timezone.utc
MAY_18 = datetime(2023, 5, 18, 11, 22, 33)
MAY_18_MILLIS = 1684408953000


def _one(value: Any, source: pa.DataType, target: pa.DataType, strict: bool = False, iceberg: str | None = None) -> Any:
    return convert(pa.array([value], source), target, ConversionRules(strict=strict), iceberg).to_pylist()[0]


# (value, its Arrow type, the column's Arrow type, what the column holds)
CASES = [
    # TestRecordConverter.testIntConversion / testLongConversion
    ("123", pa.string(), pa.int32(), 123),
    (123.0, pa.float32(), pa.int32(), 123),
    (123.0, pa.float64(), pa.int32(), 123),
    (123, pa.int64(), pa.int32(), 123),
    ("123", pa.string(), pa.int64(), 123),
    (123.0, pa.float64(), pa.int64(), 123),
    (123, pa.int32(), pa.int64(), 123),
    ("+7", pa.string(), pa.int32(), 7),  # Integer.parseInt takes a plus sign
    ("-7", pa.string(), pa.int64(), -7),
    # Number.intValue(): the fraction cut, toward zero
    (1.9, pa.float64(), pa.int32(), 1),
    (-1.9, pa.float64(), pa.int32(), -1),
    (Decimal("5.99"), pa.decimal128(5, 2), pa.int64(), 5),
    # ... a long out of an int's range wraps, a double past it stops at the end of the range
    (3_000_000_000, pa.int64(), pa.int32(), -1_294_967_296),
    (3e9, pa.float64(), pa.int32(), 2_147_483_647),
    (-3e9, pa.float64(), pa.int32(), -2_147_483_648),
    (float("nan"), pa.float64(), pa.int32(), 0),
    # testFloatConversion / testDoubleConversion
    ("123", pa.string(), pa.float32(), 123.0),
    (123, pa.int32(), pa.float32(), 123.0),
    (123, pa.int64(), pa.float64(), 123.0),
    (123.0, pa.float32(), pa.float64(), 123.0),
    (" 1.5e3 ", pa.string(), pa.float64(), 1500.0),  # Double.parseDouble trims
    ("2.5d", pa.string(), pa.float64(), 2.5),
    ("-Infinity", pa.string(), pa.float64(), float("-inf")),
    # testDecimalConversion
    ("123.45", pa.string(), pa.decimal128(10, 2), Decimal("123.45")),
    (123.45, pa.float64(), pa.decimal128(10, 2), Decimal("123.45")),
    (Decimal("123.45"), pa.decimal128(10, 2), pa.decimal128(10, 2), Decimal("123.45")),
    ("123", pa.string(), pa.decimal128(10, 0), Decimal("123")),
    (123, pa.int64(), pa.decimal128(10, 0), Decimal("123")),
    # ... setScale(scale, HALF_UP): half away from zero
    ("1.005", pa.string(), pa.decimal128(9, 2), Decimal("1.01")),
    ("-1.005", pa.string(), pa.decimal128(9, 2), Decimal("-1.01")),
    ("1.004", pa.string(), pa.decimal128(9, 2), Decimal("1.00")),
    (1.005, pa.float64(), pa.decimal128(9, 2), Decimal("1.01")),  # BigDecimal.valueOf(double): "1.005"
    ("1.5e2", pa.string(), pa.decimal128(9, 2), Decimal("150.00")),
    (7, pa.int64(), pa.decimal128(9, 2), Decimal("7.00")),
    (Decimal("2.345"), pa.decimal128(10, 3), pa.decimal128(10, 2), Decimal("2.35")),
    # convertBoolean: parseBoolean
    ("true", pa.string(), pa.bool_(), True),
    ("TRUE", pa.string(), pa.bool_(), True),
    ("false", pa.string(), pa.bool_(), False),
    ("yes", pa.string(), pa.bool_(), False),
    # convertString: Number and Boolean by toString(), Map and List as JSON
    (123, pa.int64(), pa.string(), "123"),
    (1.0, pa.float64(), pa.string(), "1.0"),
    (1e10, pa.float64(), pa.string(), "1.0E10"),
    (0.001, pa.float64(), pa.string(), "0.001"),
    (1e-4, pa.float64(), pa.string(), "1.0E-4"),
    (123456.789, pa.float64(), pa.string(), "123456.789"),
    (True, pa.bool_(), pa.string(), "true"),
    ({"a": 1, "b": "x"}, pa.struct([("a", pa.int64()), ("b", pa.string())]), pa.string(), '{"a":1,"b":"x"}'),
    ([1, 2], pa.list_(pa.int64()), pa.string(), "[1,2]"),
    # testDateConversion: a string, and days since the epoch
    ("2023-11-15", pa.string(), pa.date32(), date(2023, 11, 15)),
    (19676, pa.int64(), pa.date32(), date(2023, 11, 15)),
    (datetime(2023, 11, 15), pa.timestamp("ms"), pa.date32(), date(2023, 11, 15)),
    # testTimestampWithZoneConversion: milliseconds, and every string form
    (MAY_18_MILLIS, pa.int64(), TSZ, MAY_18.replace(tzinfo=UTC)),
    (float(MAY_18_MILLIS), pa.float64(), TSZ, MAY_18.replace(tzinfo=UTC)),
    (MAY_18_MILLIS, pa.int64(), TS, MAY_18),
    ("2023-05-18T11:22:33Z", pa.string(), TSZ, MAY_18.replace(tzinfo=UTC)),
    ("2023-05-18 11:22:33Z", pa.string(), TSZ, MAY_18.replace(tzinfo=UTC)),
    ("2023-05-18T11:22:33+00", pa.string(), TSZ, MAY_18.replace(tzinfo=UTC)),
    ("2023-05-18 11:22:33+00:00", pa.string(), TSZ, MAY_18.replace(tzinfo=UTC)),
    ("2023-05-18T11:22:33+0000", pa.string(), TSZ, MAY_18.replace(tzinfo=UTC)),
    ("2023-05-18T11:22:33", pa.string(), TSZ, MAY_18.replace(tzinfo=UTC)),  # no offset: UTC
    ("2023-05-18 11:22:33", pa.string(), TSZ, MAY_18.replace(tzinfo=UTC)),
    ("2023-05-18T03:22:33-08", pa.string(), TSZ, MAY_18.replace(tzinfo=UTC)),  # the offset respected
    ("2023-05-18 03:22:33-08:00", pa.string(), TSZ, MAY_18.replace(tzinfo=UTC)),
    ("2023-05-18T03:22:33-0800", pa.string(), TSZ, MAY_18.replace(tzinfo=UTC)),
    ("2023-05-18T11:22", pa.string(), TSZ, datetime(2023, 5, 18, 11, 22, tzinfo=UTC)),
    # testTimestampWithZoneAndFractionalSecondsConversion
    ("2026-03-31T03:17:37.260514+00:00", pa.string(), TSZ, datetime(2026, 3, 31, 3, 17, 37, 260514, tzinfo=UTC)),
    ("2026-03-31 03:17:37.260514+0000", pa.string(), TSZ, datetime(2026, 3, 31, 3, 17, 37, 260514, tzinfo=UTC)),
    ("2026-03-31T03:17:37.260514Z", pa.string(), TSZ, datetime(2026, 3, 31, 3, 17, 37, 260514, tzinfo=UTC)),
    ("2026-03-31T03:17:37.260514789Z", pa.string(), TSZ, datetime(2026, 3, 31, 3, 17, 37, 260514, tzinfo=UTC)),
    ("2026-03-31T03:17:37.5Z", pa.string(), TSZ, datetime(2026, 3, 31, 3, 17, 37, 500000, tzinfo=UTC)),
    # testTimestampWithoutZoneConversion: the offset dropped, the local time kept
    ("2023-05-18T11:22:33", pa.string(), TS, MAY_18),
    ("2023-05-18T11:22:33-08", pa.string(), TS, MAY_18),
    ("2023-05-18 11:22:33-08:00", pa.string(), TS, MAY_18),
    ("2023-05-18T11:22:33-0800", pa.string(), TS, MAY_18),
    ("2023-05-18T11:22:33Z", pa.string(), TS, MAY_18),
    ("2026-03-31 03:17:37.260514+00:00", pa.string(), TS, datetime(2026, 3, 31, 3, 17, 37, 260514)),
    # ... and a timestamp of either kind keeps its instant
    (MAY_18.replace(tzinfo=UTC), pa.timestamp("ms", tz="UTC"), TS, MAY_18),
    (MAY_18, pa.timestamp("ms"), TSZ, MAY_18.replace(tzinfo=UTC)),
    # convertBase64Binary
    ("aGVsbG8=", pa.string(), pa.binary(), b"hello"),
    ("aGVsbG8", pa.string(), pa.binary(), b"hello"),  # padding is optional
    (b"raw", pa.binary(), pa.binary(), b"raw"),
]


@pytest.mark.parametrize(("value", "source", "target", "expected"), CASES,
                         ids=[f"{c[0]!r}:{c[1]}->{c[2]}" for c in CASES])
def test_a_value_takes_the_columns_type_as_the_java_sink_converts_it(value: Any, source: pa.DataType,
                                                                      target: pa.DataType, expected: Any) -> None:
    assert converts(source, target)
    got = _one(value, source, target)
    if isinstance(expected, float) and expected != expected:
        assert got != got
    else:
        assert got == expected and type(got) is type(expected), (got, expected)


# (value, its Arrow type, the column's Arrow type): what Java refuses, refused here too
REFUSED = [
    ("12x", pa.string(), pa.int32()),
    ("1.5", pa.string(), pa.int64()),  # parseLong takes no fraction
    ("3000000000", pa.string(), pa.int32()),  # parseInt refuses what does not fit
    (" 5", pa.string(), pa.int32()),
    (True, pa.bool_(), pa.int32()),
    (True, pa.bool_(), pa.float64()),
    ("one", pa.string(), pa.float64()),
    ("1.2.3", pa.string(), pa.decimal128(9, 2)),
    ("123456789", pa.string(), pa.decimal128(9, 2)),  # past the precision
    (True, pa.bool_(), pa.decimal128(9, 2)),
    (1, pa.int64(), pa.bool_()),
    ("2023-11-15T00:00:00", pa.string(), pa.date32()),
    ("15/11/2023", pa.string(), pa.date32()),
    ("2023-05-18", pa.string(), TSZ),  # a date is no timestamp for LocalDateTime.parse
    # Arrow's own parser reads these three; the rules want minutes at least.
    ("2023-05-18", pa.string(), TS),
    ("2023-05-18 11", pa.string(), TS),
    ("2023-05-18T11Z", pa.string(), TSZ),
    ("2023-05-18T11:22:33 PST", pa.string(), TSZ),
    ("2023-05-18T11:22:33z", pa.string(), TS),
    ("yesterday", pa.string(), TS),
    (True, pa.bool_(), TSZ),
    ("not base64!", pa.string(), pa.binary()),
]


@pytest.mark.parametrize(("value", "source", "target"), REFUSED, ids=[f"{c[0]!r}:{c[1]}->{c[2]}" for c in REFUSED])
def test_a_value_java_refuses_is_refused_naming_it(value: Any, source: pa.DataType, target: pa.DataType) -> None:
    with pytest.raises(ValueConversionError, match=r"cannot|not|out of|digits|neither"):
        _one(value, source, target)


@pytest.mark.parametrize(("value", "source", "target"), [
    (1.9, pa.float64(), pa.int32()),
    (3_000_000_000, pa.int64(), pa.int32()),
    (3e9, pa.float64(), pa.int32()),
    (float("nan"), pa.float64(), pa.int64()),
    (Decimal("5.5"), pa.decimal128(5, 1), pa.int32()),
    ("yes", pa.string(), pa.bool_()),
])
def test_strict_rules_refuse_what_java_would_change(value: Any, source: pa.DataType, target: pa.DataType) -> None:
    with pytest.raises(ValueConversionError):
        _one(value, source, target, strict=True)


def test_strict_rules_still_take_what_converts_exactly() -> None:
    assert _one(123.0, pa.float64(), pa.int32(), strict=True) == 123
    assert _one("FALSE", pa.string(), pa.bool_(), strict=True) is False
    assert _one(2**31 - 1, pa.int64(), pa.int32(), strict=True) == 2**31 - 1


def test_a_uuid_column_takes_a_uuid_string_in_any_case_and_refuses_others() -> None:
    upper = "F79C3E09-677C-4BBD-A479-3F349CB785E7"
    assert _one(upper, pa.string(), pa.string(), iceberg="uuid") == upper.lower()
    with pytest.raises(ValueConversionError, match="not a UUID"):
        _one("f79c3e09-677c", pa.string(), pa.string(), iceberg="uuid")


def test_a_fixed_column_takes_base64_of_its_length_only() -> None:
    assert _one("AAECAw==", pa.string(), pa.binary(), iceberg="fixed[4]") == b"\x00\x01\x02\x03"
    with pytest.raises(ValueConversionError, match="not 4 bytes"):
        _one("AAEC", pa.string(), pa.binary(), iceberg="fixed[4]")


def test_nulls_stay_null_whatever_the_conversion() -> None:
    for source, target in [(pa.string(), TSZ), (pa.float64(), pa.int32()), (pa.string(), pa.decimal128(9, 2)),
                           (pa.int64(), pa.date32()), (pa.string(), pa.bool_()), (pa.string(), pa.binary())]:
        out = convert(pa.array([None, None], source), target)
        assert out.type == target and out.null_count == 2, (source, target)


def test_a_whole_column_is_converted_at_once_and_the_first_bad_value_named() -> None:
    times = convert(pa.array(["2023-05-18T11:22:33Z", None, "2023-05-18T03:22:33-08"]), TSZ)
    assert times.to_pylist() == [MAY_18.replace(tzinfo=UTC), None, MAY_18.replace(tzinfo=UTC)]
    with pytest.raises(ValueConversionError, match="'2023-13'"):
        convert(pa.array(["2023-05-18T11:22:33Z", "2023-13"]), TSZ)


def test_a_type_no_rule_takes_is_refused_before_any_value_is_read() -> None:
    assert not converts(pa.bool_(), pa.int32())
    assert not converts(pa.struct([("a", pa.int64())]), pa.int64())
    assert converts(pa.int64(), TSZ) and converts(pa.string(), pa.date32()) and converts(pa.float64(), pa.string())


@pytest.mark.parametrize("target", [TSZ, TS], ids=["timestamptz", "timestamp"])
def test_a_column_of_timestamp_strings_converts_as_its_values_do_one_by_one(target: pa.DataType) -> None:
    # A column in one form is read by Arrow's parser; a column mixing forms by the rules: the same values.
    strings = [c[0] for c in CASES if c[1] == pa.string() and c[2] in (TSZ, TS)] + [None]
    alone = [convert(pa.array([s], pa.string()), target)[0].as_py() for s in strings]
    assert convert(pa.array(strings, pa.string()), target).to_pylist() == alone
    for s, want in zip(strings, alone, strict=True):  # and each form alone, as a whole column of it
        assert convert(pa.array([s, s], pa.string()), target).to_pylist() == [want, want]
