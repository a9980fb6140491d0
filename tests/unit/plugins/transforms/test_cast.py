"""Cast$Key and Cast$Value, with the cases of Connect's CastTest and Values as facts."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from tabletopic.config.connector_keys import TRANSFORM_GROUP
from tabletopic.config.plugin_names import available_plugins
from tests.unit.plugins.transforms.smt import batch, failed, keys, primitive, run, tombstones, values

CAST = "org.apache.kafka.connect.transforms.Cast$Value"


@pytest.mark.parametrize(("spec", "error"), [
    ("", "Must specify at least one field to cast"),
    ("foo:faketype", "Invalid type found in casting spec: faketype"),
    ("foo:int8,int32", "may only specify a single cast"),
    ("foo:int8:extra", "Invalid rename mapping"),
    ("foo:bytes", "does not support casting to BYTES"),
    ("foo:array", "does not support casting to ARRAY"),
])
def test_a_spec_connect_refuses_is_refused(spec: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        available_plugins(TRANSFORM_GROUP)[CAST].load()().configure({"spec": spec})


# (input type, input, target, output): Connect's whole-value casts.
WHOLE = [
    (pa.int8(), 42, "int16", 42),
    (pa.int32(), 300, "int8", 44),  # the low bits, as Java's byteValue
    (pa.int64(), 2**40 + 5, "int32", 5),
    (pa.int64(), 42, "float32", 42.0),
    (pa.int64(), 42, "boolean", True),
    (pa.int64(), 0, "boolean", False),
    (pa.int32(), 42, "string", "42"),
    (pa.float64(), 42.9, "int32", 42),
    (pa.float64(), -1.9, "int32", -1),
    (pa.float64(), 1e10, "int32", 2147483647),  # saturates before narrowing
    (pa.float64(), 1e10, "int16", -1),  # (short)(int)1e10
    (pa.float64(), float("nan"), "int64", 0),
    (pa.float64(), 0.5, "boolean", False),  # longValue() is 0
    (pa.float64(), 1e10, "string", "1.0E10"),
    (pa.float64(), 0.001, "string", "0.001"),
    (pa.float64(), 1e-4, "string", "1.0E-4"),
    (pa.float64(), 42.0, "string", "42.0"),
    (pa.float32(), 1.1, "string", "1.1"),
    (pa.float64(), 1.5, "float32", 1.5),
    (pa.bool_(), True, "int32", 1),
    (pa.bool_(), False, "float64", 0.0),
    (pa.bool_(), True, "string", "true"),
    (pa.string(), "42", "int32", 42),
    (pa.string(), "+42", "int64", 42),
    (pa.string(), "-128", "int8", -128),
    (pa.string(), "42.5", "float64", 42.5),
    (pa.string(), " 42.5 ", "float64", 42.5),  # parseDouble trims
    (pa.string(), "1e3", "float32", 1000.0),
    (pa.string(), "2f", "float64", 2.0),
    (pa.string(), "TRUE", "boolean", True),
    (pa.string(), "yes", "boolean", False),
    (pa.string(), "text", "string", "text"),
    (pa.binary(), b"\x01\x02\x03", "string", "AQID"),
    (pa.decimal128(5, 2), Decimal("1.50"), "string", "1.50"),
    (pa.decimal128(10, 8), Decimal("0.00000012"), "string", "1.2E-7"),
    (pa.decimal128(5, 2), Decimal("1.99"), "int32", 1),
    (pa.decimal128(5, 2), Decimal("-1.99"), "float64", -1.99),
    (pa.timestamp("us", tz="UTC"), dt.datetime(2024, 1, 2, 3, 4, 5, 6000, tzinfo=dt.UTC), "int64", 1704164645006),
    (pa.timestamp("us", tz="UTC"), dt.datetime(2024, 1, 2, 3, 4, 5, 6000, tzinfo=dt.UTC), "string",
     "2024-01-02T03:04:05.006Z"),
    (pa.timestamp("us", tz="UTC"), dt.datetime(2024, 1, 2, tzinfo=dt.UTC), "string", "2024-01-02"),  # a midnight
    (pa.timestamp("us", tz="UTC"), dt.datetime(1970, 1, 1, 10, 0, tzinfo=dt.UTC), "string", "10:00:00.000Z"),
    (pa.date32(), dt.date(2024, 1, 2), "int32", 19724),
    (pa.date32(), dt.date(2024, 1, 2), "string", "2024-01-02"),
]


@pytest.mark.parametrize(("arrow", "given", "target", "expected"), WHOLE)
def test_a_whole_value_cast(arrow: pa.DataType, given: Any, target: str, expected: Any) -> None:
    out = run(CAST, {"spec": target}, primitive([given, None], arrow))
    (got, null) = values(out)
    assert null is None and out.failures == []
    assert got == (pytest.approx(expected) if isinstance(expected, float) else expected)
    assert out.batches[0].primitive


@pytest.mark.parametrize(("given", "target"), [("abc", "int32"), ("128", "int8"), ("1.5", "int64"), ("", "int32"),
                                               ("0x10", "int32"), ("1,5", "float64"), ("nan", "float64")])
def test_a_string_java_cannot_read_as_the_number_fails_its_record_alone(given: str, target: str) -> None:
    out = run(CAST, {"spec": target}, primitive(["7", given, "8"]))
    assert failed(out) == {1: f"transform 't': Value ({given}) was out of range for requested data type"}
    assert values(out) == [7, 8] if target != "float64" else values(out) == [7.0, 8.0]


def test_bytes_go_to_string_only() -> None:
    out = run(CAST, {"spec": "int32"}, primitive([b"\x01", None], pa.binary()))
    assert list(failed(out)) == [0] and values(out) == [None]


def test_fields_of_a_struct_are_cast_and_the_others_kept() -> None:
    records = batch([{"id": "1", "amount": 2.75, "ok": 1, "note": "x"}, {"id": "2", "amount": None, "ok": 0,
                                                                        "note": None}])
    out = run(CAST, {"spec": "id:int64, amount:int32,ok:boolean,missing:string"}, records)
    assert values(out) == [{"id": 1, "amount": 2, "ok": True, "note": "x"},
                           {"id": 2, "amount": None, "ok": False, "note": None}]
    assert out.batches[0].value.schema.field("id").type == pa.int64()


def test_a_struct_field_is_no_input_for_the_records_that_have_one() -> None:
    records = batch([{"id": 1, "inner": {"a": 1}}, {"id": 2, "inner": None}])
    out = run(CAST, {"spec": "inner:string"}, records)
    assert failed(out) == {0: "transform 't': Cast transformation does not support casting from STRUCT; supported "
                              "types are [INT8, INT16, INT32, INT64, FLOAT32, FLOAT64, BOOLEAN, STRING, BYTES]"}
    assert values(out) == [{"id": 2, "inner": None}]


@pytest.mark.parametrize(("schemaless", "message"), [
    (False, "Only Struct objects supported for [cast types], found: java.lang.String"),
    (True, "Only Map objects supported in absence of schema for [cast types], found: java.lang.String"),
])
def test_a_field_cast_of_a_primitive_fails(schemaless: bool, message: str) -> None:
    out = run(CAST, {"spec": "a:int32"}, primitive(["1"], schemaless=schemaless))
    assert failed(out) == {0: f"transform 't': {message}"}


def test_a_whole_value_cast_of_a_struct_fails() -> None:
    out = run(CAST, {"spec": "int32"}, batch([{"a": 1}]))
    assert "does not support casting from STRUCT" in failed(out)[0]


def test_a_tombstone_passes_and_the_key_variant_casts_the_key() -> None:
    out = run(CAST, {"spec": "int64"}, tombstones(1))
    assert values(out) == [None] and out.failures == []
    key = pa.table({"value": pa.array(["12"])})
    out = run("org.apache.kafka.connect.transforms.Cast$Key", {"spec": "int64"},
              batch([{"a": 1}], key=key, key_primitive=True))
    assert keys(out) == [12] and values(out) == [{"a": 1}]
