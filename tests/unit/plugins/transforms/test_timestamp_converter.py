"""TimestampConverter$Key and $Value, with the values of Connect's TimestampConverterTest as facts.

Connect's test instant is 1970-01-02 00:00:01.234 UTC: 86 401 234 ms; with micro- and nanoseconds
86 401 234 123 us and 86 401 234 123 456 ns; and the string "1970 01 02 00 00 01 234 UTC" in the format
"yyyy MM dd HH mm ss SSS z".
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
import pytest

from tests.unit.plugins.transforms.smt import batch, failed, keys, primitive, run, tombstones, values

TC = "org.apache.kafka.connect.transforms.TimestampConverter$Value"
MILLIS = 86_401_234
FORMAT = "yyyy MM dd HH mm ss SSS z"
TEXT = "1970 01 02 00 00 01 234 UTC"
INSTANT = dt.datetime(1970, 1, 2, 0, 0, 1, 234000, tzinfo=dt.UTC)


@pytest.mark.parametrize(("props", "error"), [
    ({}, 'Missing required configuration "target.type"'),
    ({"target.type": "invalid"}, "String must be one of"),
    ({"target.type": "string"}, "requires format option"),
    ({"target.type": "string", "format": "bad-format-x"}, "SimpleDateFormat-compatible pattern"),
    ({"target.type": "unix", "unix.precision": "minutes"}, "String must be one of"),
])
def test_settings_connect_refuses_are_refused(props: dict[str, str], error: str) -> None:
    from tabletopic.config.connector_keys import TRANSFORM_GROUP
    from tabletopic.config.plugin_names import available_plugins

    with pytest.raises(ValueError, match=error):
        available_plugins(TRANSFORM_GROUP)[TC].load()().configure(props)


# (input type, input, settings, output)
CASES: list[tuple[pa.DataType, Any, dict[str, str], Any]] = [
    (pa.timestamp("us", tz="UTC"), INSTANT, {"target.type": "Timestamp"}, INSTANT),
    (pa.timestamp("us", tz="UTC"), INSTANT, {"target.type": "unix"}, MILLIS),
    (pa.timestamp("us", tz="UTC"), INSTANT, {"target.type": "unix", "unix.precision": "seconds"}, 86_401),
    (pa.timestamp("us", tz="UTC"), INSTANT, {"target.type": "unix", "unix.precision": "microseconds"},
     86_401_234_000),
    (pa.timestamp("us", tz="UTC"), INSTANT, {"target.type": "unix", "unix.precision": "nanoseconds"},
     86_401_234_000_000),
    (pa.timestamp("us", tz="UTC"), INSTANT, {"target.type": "Date"}, dt.date(1970, 1, 2)),
    (pa.timestamp("us", tz="UTC"), INSTANT, {"target.type": "Time"}, 1_234_000),  # micros of the day
    (pa.timestamp("us", tz="UTC"), INSTANT, {"target.type": "string", "format": FORMAT}, TEXT),
    (pa.timestamp("us", tz="UTC"), INSTANT + dt.timedelta(microseconds=999), {"target.type": "unix"}, MILLIS),
    (pa.date32(), dt.date(1970, 1, 2), {"target.type": "unix"}, 86_400_000),
    (pa.date32(), dt.date(1970, 1, 2), {"target.type": "Timestamp"}, dt.datetime(1970, 1, 2, tzinfo=dt.UTC)),
    (pa.int64(), MILLIS, {"target.type": "Timestamp"}, INSTANT),
    (pa.int64(), 86_401, {"target.type": "Timestamp", "unix.precision": "seconds"},
     dt.datetime(1970, 1, 2, 0, 0, 1, tzinfo=dt.UTC)),
    (pa.int64(), 86_401_234_123, {"target.type": "Timestamp", "unix.precision": "microseconds"}, INSTANT),
    (pa.int64(), 86_401_234_123_456, {"target.type": "unix", "unix.precision": "nanoseconds"}, 86_401_234_000_000),
    (pa.int64(), -1_500, {"target.type": "unix", "unix.precision": "microseconds"}, -1_000),  # cut toward zero
    (pa.int64(), MILLIS, {"target.type": "string", "format": FORMAT}, TEXT),
    (pa.int64(), MILLIS, {"target.type": "Date"}, dt.date(1970, 1, 2)),
    (pa.int64(), -1, {"target.type": "Date"}, dt.date(1969, 12, 31)),
    (pa.string(), TEXT, {"target.type": "Timestamp", "format": FORMAT}, INSTANT),
    (pa.string(), TEXT, {"target.type": "unix", "format": FORMAT}, MILLIS),
    (pa.string(), "2024-01-15T10:00:00Z", {"target.type": "Date", "format": "yyyy-MM-dd"}, dt.date(2024, 1, 15)),
    (pa.string(), "2024-02-30", {"target.type": "Date", "format": "yyyy-MM-dd"}, dt.date(2024, 3, 1)),  # lenient
    (pa.string(), "01/02/24 1:05 PM", {"target.type": "unix", "format": "MM/dd/yy h:mm a"}, 1704200700000),
]


@pytest.mark.parametrize(("arrow", "given", "props", "expected"), CASES)
def test_a_whole_value_converts(arrow: pa.DataType, given: Any, props: dict[str, str], expected: Any) -> None:
    out = run(TC, props, primitive([given, None], arrow))
    assert out.failures == [] and values(out) == [expected, None]


@pytest.mark.parametrize(("arrow", "given", "props", "expected"), CASES[:12])
def test_a_field_converts_and_the_others_stay(arrow: pa.DataType, given: Any, props: dict[str, str],
                                              expected: Any) -> None:
    records = batch(pa.table({"id": [1, 2], "ts": pa.array([given, None], arrow)}))
    out = run(TC, {"field": "ts", **props}, records)
    assert values(out) == [{"id": 1, "ts": expected}, {"id": 2, "ts": None}]


def test_a_string_the_format_does_not_read_fails_its_record_alone() -> None:
    out = run(TC, {"target.type": "unix", "format": "yyyy-MM-dd"}, primitive(["2024-01-02", "garbage", "2024-01-03"]))
    assert failed(out) == {1: "transform 't': Could not parse timestamp: value (garbage) does not match pattern "
                              "(yyyy-MM-dd)"}
    assert values(out) == [1704153600000, 1704240000000]


@pytest.mark.parametrize(("records", "message"), [
    (primitive([1.5], pa.float64(), schemaless=True), "does not support class java.lang.Double objects as timestamps"),
    (primitive([1], pa.int32()), "Schema Schema{INT32} does not correspond to a known timestamp type format"),
    (primitive(["2024"]), "needs format to read string timestamps"),
])
def test_an_input_that_is_no_timestamp_fails(records: Any, message: str) -> None:
    out = run(TC, {"target.type": "unix"}, records)
    assert message in failed(out)[0]


def test_schemaless_epoch_millis_in_a_field_become_a_timestamp() -> None:
    records = batch([{"id": 1, "ts": 1_700_000_000_000}, {"id": 2}], schemaless=True)
    out = run(TC, {"field": "ts", "target.type": "Timestamp"}, records)
    assert values(out) == [{"id": 1, "ts": dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=dt.UTC)},
                           {"id": 2, "ts": None}]


def test_a_field_the_value_lacks_leaves_it_and_a_tombstone_passes() -> None:
    out = run(TC, {"field": "nope", "target.type": "unix"}, batch([{"id": 1}]))
    assert values(out) == [{"id": 1}]
    assert values(run(TC, {"field": "ts", "target.type": "unix"}, tombstones(2))) == [None, None]


def test_the_key_variant_converts_the_key() -> None:
    key = pa.table({"value": pa.array([MILLIS], pa.int64())})
    out = run("org.apache.kafka.connect.transforms.TimestampConverter$Key", {"target.type": "Timestamp"},
              batch([{"a": 1}], key=key, key_primitive=True))
    assert keys(out) == [INSTANT]
