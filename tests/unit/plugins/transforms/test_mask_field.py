"""MaskField$Key and $Value, with Connect's MaskFieldTest cases as facts."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from tests.unit.plugins.transforms.smt import batch, failed, run, tombstones, values

MASK = "org.apache.kafka.connect.transforms.MaskField$Value"


@pytest.mark.parametrize(("arrow", "given", "masked"), [
    (pa.bool_(), True, False),
    (pa.int8(), 8, 0),
    (pa.int32(), 32, 0),
    (pa.int64(), 64, 0),
    (pa.float32(), 1.5, 0.0),
    (pa.float64(), 2.5, 0.0),
    (pa.string(), "secret", ""),
    (pa.decimal128(5, 2), Decimal("1.23"), Decimal("0.00")),
    (pa.timestamp("us", tz="UTC"), dt.datetime(2024, 1, 1, tzinfo=dt.UTC), dt.datetime(1970, 1, 1, tzinfo=dt.UTC)),
    (pa.date32(), dt.date(2024, 1, 1), dt.date(1970, 1, 1)),
    (pa.list_(pa.int64()), [1, 2], []),
    (pa.map_(pa.string(), pa.int64()), [("k", 1)], []),
])
def test_each_type_gets_its_empty_value_and_a_null_stays_null(arrow: pa.DataType, given: Any, masked: Any) -> None:
    records = batch(pa.table({"f": pa.array([given, None], arrow), "other": [1, 2]}))
    assert values(run(MASK, {"fields": "f"}, records)) == [{"f": masked, "other": 1}, {"f": None, "other": 2}]


@pytest.mark.parametrize(("arrow", "given", "replacement", "masked"), [
    (pa.int32(), 5, "123", 123),
    (pa.int64(), 5, "-9", -9),
    (pa.float64(), 1.5, "2.5", 2.5),
    (pa.string(), "secret", "******", "******"),
    (pa.decimal128(10, 2), Decimal("1.23"), "9.99", Decimal("9.99")),
])
def test_a_replacement_for_numbers_and_strings(arrow: pa.DataType, given: Any, replacement: str, masked: Any) -> None:
    records = batch(pa.table({"f": pa.array([given], arrow)}))
    assert values(run(MASK, {"fields": "f", "replacement": replacement}, records)) == [{"f": masked}]


@pytest.mark.parametrize(("arrow", "given", "replacement", "error"), [
    (pa.bool_(), True, "x", "Cannot mask value of type class java.lang.Boolean with custom replacement."),
    (pa.int32(), 1, "abc", "Unable to convert abc"),
    (pa.binary(), b"\x00", None, "Cannot mask value of type: class [B"),
])
def test_what_cannot_be_masked_fails_the_records_that_hold_a_value(arrow: pa.DataType, given: Any,
                                                                    replacement: str | None, error: str) -> None:
    props = {"fields": "f", **({"replacement": replacement} if replacement else {})}
    out = run(MASK, props, batch(pa.table({"f": pa.array([given, None], arrow)})))
    assert list(failed(out)) == [0] and error in failed(out)[0] and values(out) == [{"f": None}]


def test_a_schemaless_nested_object_becomes_an_empty_one_and_a_missing_field_stays_missing() -> None:
    out = run(MASK, {"fields": "o,absent"}, batch([{"o": {"a": 1}}], schemaless=True))
    assert values(out) == [{"o": {"a": None}}]


def test_a_tombstone_fails_as_in_connect() -> None:
    out = run(MASK, {"fields": "f"}, tombstones(1))
    assert failed(out) == {0: "transform 't': Only Map objects supported in absence of schema for [mask fields], "
                              "found: null"}
