"""Avro bodies decoded a field at a time give the rows fastavro gives, and the same failures."""

from __future__ import annotations

import datetime
import decimal
import io
import math
import re
import struct
import uuid
from typing import Any

import fastavro
import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tabletopic.registry.avro_schema import resolve
from tabletopic_plugins.converters.avro_arrow import raw_schema, record_shape
from tabletopic_plugins.converters.avro_batch_decode import batch_decoder
from tabletopic_plugins.converters.avro_converter import AvroConverter
from tabletopic_plugins.converters.registry_client import FetchedSchema
from tests.unit.fuzzing import examples

SCHEMA: dict[str, Any] = {"type": "record", "name": "R", "namespace": "t", "fields": [
    {"name": "id", "type": "long"},
    {"name": "n", "type": "int"},
    {"name": "f", "type": "float"},
    {"name": "d", "type": "double"},
    {"name": "flag", "type": "boolean"},
    {"name": "s", "type": "string"},
    {"name": "b", "type": "bytes"},
    {"name": "nothing", "type": "null"},
    {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "BLUE"]}},
    {"name": "four", "type": {"type": "fixed", "name": "Four", "size": 4}},
    {"name": "inner", "type": {"type": "record", "name": "Inner", "fields": [
        {"name": "x", "type": "long"}, {"name": "label", "type": ["null", "string"]}]}},
    {"name": "maybe_inner", "type": ["null", "Inner"]},
    {"name": "maybe_long", "type": ["long", "null"]},
    {"name": "maybe_color", "type": ["null", "Color"]},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
    {"name": "uid", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "tod", "type": {"type": "int", "logicalType": "time-millis"}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "inners", "type": {"type": "array", "items": "Inner"}},
    {"name": "grid", "type": {"type": "array", "items": {"type": "array", "items": "long"}}},
    {"name": "attrs", "type": {"type": "map", "values": "long"}},
    {"name": "maybe_tags", "type": ["null", {"type": "array", "items": ["null", "double"]}]},
]}
SCHEMA_ID = 3
_UTC = datetime.timezone.utc
_TEXT = st.text(max_size=5)
_LONG = st.integers(-2**63, 2**63 - 1)


class _Registry:
    def by_id(self, schema_id: int, schema_type: str = "AVRO") -> FetchedSchema:
        return FetchedSchema(schema_id, SCHEMA, ())


def _inner() -> st.SearchStrategy[dict]:
    return st.fixed_dictionaries({"x": _LONG, "label": st.none() | _TEXT})


_RECORD = st.fixed_dictionaries({
    "id": _LONG, "n": st.integers(-2**31, 2**31 - 1), "f": st.floats(width=32), "d": st.floats(),
    "flag": st.booleans(), "s": _TEXT, "b": st.binary(max_size=5), "nothing": st.none(),
    "color": st.sampled_from(["RED", "GREEN", "BLUE"]), "four": st.binary(min_size=4, max_size=4),
    "inner": _inner(), "maybe_inner": st.none() | _inner(), "maybe_long": st.none() | _LONG,
    "maybe_color": st.none() | st.sampled_from(["RED", "BLUE"]),
    "at": st.datetimes(min_value=datetime.datetime(1900, 1, 1), max_value=datetime.datetime(2200, 1, 1),
                       timezones=st.just(_UTC)).map(lambda t: t.replace(microsecond=t.microsecond // 1000 * 1000)),
    "day": st.dates(), "price": st.integers(-10**12 + 1, 10**12 - 1).map(lambda u: decimal.Decimal(u).scaleb(-2)),
    "uid": st.uuids().map(str), "tod": st.times().map(lambda t: t.replace(microsecond=t.microsecond // 1000 * 1000)),
    "tags": st.lists(_TEXT, max_size=4), "inners": st.lists(_inner(), max_size=3),
    "grid": st.lists(st.lists(_LONG, max_size=3), max_size=3), "attrs": st.dictionaries(_TEXT, _LONG, max_size=3),
    "maybe_tags": st.none() | st.lists(st.none() | st.floats(), max_size=3),
})


def _body(record: dict) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(SCHEMA), record)
    return out.getvalue()


def _both(bodies: list[bytes], times_as_integers: bool = True) -> tuple[Any, Any]:
    """What the converter makes of the framed bodies with the batch decoder, and with fastavro alone."""
    values = [b"\x00" + struct.pack(">I", SCHEMA_ID) + body for body in bodies]
    out = []
    for batch in (True, False):
        converter = AvroConverter()
        converter.client = _Registry()  # type: ignore[assignment]
        compiled = converter._compile(SCHEMA_ID)
        assert not isinstance(compiled, str) and compiled.batch is not None
        if not batch:
            compiled.batch = None
        result = converter.convert("t", values)
        rows = [(int(i), _same_nan(row)) for part in result.parts
                for i, row in zip(part.indexes, (_numbered_times(part.table) if times_as_integers
                                                 else part.table).to_pylist(), strict=True)]
        # fastavro's messages name the buffer's address, which differs from run to run.
        failures = [(f.index, re.sub(r"0x[0-9a-f]+", "0x", f.reason)) for f in result.failures]
        out.append((sorted(rows, key=lambda r: r[0]), failures))
    return out[0], out[1]


def _numbered_times(table: pa.Table) -> pa.Table:
    """Dates and timestamps as their integers: changed bytes can make a day past Python's year 9999, which
    Arrow and Iceberg hold but ``to_pylist`` cannot turn into a ``date``."""
    def integer(field: pa.Field) -> pa.Field:
        if pa.types.is_date32(field.type):
            return field.with_type(pa.int32())
        return field.with_type(pa.int64()) if pa.types.is_timestamp(field.type) else field
    return table.cast(pa.schema([integer(f) for f in table.schema]))


def _decoder() -> Any:
    converter = AvroConverter()
    converter.client = _Registry()  # type: ignore[assignment]
    compiled = converter._compile(SCHEMA_ID)
    assert not isinstance(compiled, str)
    return compiled.batch


def _same_nan(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _same_nan(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_same_nan(v) for v in value)
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return value


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_RECORD, min_size=1, max_size=6))
def test_records_decode_to_fastavros_rows(records: list[dict]) -> None:
    bodies = [_body(r) for r in records]
    batch, alone = _both(bodies)
    assert batch == alone
    assert _decoder().table(bodies, 0) is not None, "serialized records were left to fastavro"
    assert batch[1] == [] and len(batch[0]) == len(records)


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_RECORD, min_size=1, max_size=4), st.data())
def test_changed_bytes_give_fastavros_rows_and_failures(records: list[dict], data: Any) -> None:
    bodies = [_body(r) for r in records]
    target = data.draw(st.integers(0, len(bodies) - 1))
    body = bytearray(bodies[target])
    for _ in range(data.draw(st.integers(1, 3))):
        position = data.draw(st.integers(0, len(body) - 1))
        body[position] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(-2, 2))
    bodies[target] = bytes(body[:cut] if cut < 0 else body + bytes(cut))
    batch, alone = _both(bodies)
    assert batch == alone


def test_a_schema_with_a_union_of_several_types_is_left_to_fastavro() -> None:
    converter = AvroConverter()

    class Registry:
        def by_id(self, schema_id: int, schema_type: str = "AVRO") -> FetchedSchema:
            return FetchedSchema(schema_id, {"type": "record", "name": "A", "fields": [
                {"name": "either", "type": ["null", "long", "string"]}]}, ())

    converter.client = Registry()  # type: ignore[assignment]
    compiled = converter._compile(1)
    assert not isinstance(compiled, str) and compiled.batch is None


def test_the_batch_decoder_reads_the_values_written() -> None:
    record = {"id": -5, "n": 7, "f": 1.5, "d": -2.25, "flag": True, "s": "é", "b": b"\x00\xff", "nothing": None,
              "color": "BLUE", "four": b"abcd", "inner": {"x": 1, "label": None},
              "maybe_inner": {"x": 2, "label": "l"}, "maybe_long": None, "maybe_color": "RED",
              "at": datetime.datetime(2026, 11, 27, 1, 2, 3, 4000, _UTC), "day": datetime.date(2026, 1, 2),
              "price": decimal.Decimal("-12.34"), "uid": str(uuid.UUID(int=9)), "tod": datetime.time(1, 2, 3, 4000),
              "tags": ["a", "b"], "inners": [{"x": 3, "label": None}], "grid": [[1], [], [2, 3]], "attrs": {"k": 1},
              "maybe_tags": [None, 1.5]}
    (rows, failures), _ = _both([_body(record)], times_as_integers=False)
    assert failures == []
    row = rows[0][1]
    assert row["id"] == -5 and row["s"] == "é" and row["color"] == "BLUE"
    assert row["maybe_inner"] == {"x": 2, "label": "l"}
    assert row["at"] == record["at"] and row["day"] == record["day"] and row["price"] == record["price"]
    assert row["tod"] == ((1 * 60 + 2) * 60 + 3) * 1_000_000 + 4000 and row["maybe_long"] is None
    assert row["tags"] == ["a", "b"] and row["inners"] == [{"x": 3, "label": None}] and row["grid"] == [[1], [], [2, 3]]
    assert row["attrs"] == [("k", 1)] and row["maybe_tags"] == [None, 1.5]
    assert pa.types.is_decimal(pa.array([row["price"]]).type)


def test_a_map_key_written_twice_and_a_long_block_go_to_fastavro() -> None:
    schema = {"type": "record", "name": "M", "fields": [
        {"name": "attrs", "type": {"type": "map", "values": "long"}},
        {"name": "ids", "type": {"type": "array", "items": "long"}}]}
    parsed = fastavro.parse_schema(raw_schema(schema))
    decoder = batch_decoder(parsed, record_shape(resolve(schema, {})).wire)
    assert decoder is not None
    twice = b"\x04" + b"\x02k\x02" + b"\x02k\x04" + b"\x00" + b"\x00"  # {"k": 1, "k": 2}, then no ids
    assert fastavro.schemaless_reader(io.BytesIO(twice), parsed, None) == {"attrs": {"k": 2}, "ids": []}
    assert decoder.table([twice], 0) is None
    many = b"\x00" + _varint(2 * 300) + b"\x02" * 300 + b"\x00"  # 300 ids in one block
    assert len(fastavro.schemaless_reader(io.BytesIO(many), parsed, None)["ids"]) == 300
    assert decoder.table([many], 0) is None
    few = b"\x00" + _varint(2 * 3) + b"\x02\x04\x06" + b"\x00"
    table = decoder.table([few, few], 0)
    assert table is not None and table.column("ids").to_pylist() == [[1, 2, 3], [1, 2, 3]]


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes(out + bytes([value]))
