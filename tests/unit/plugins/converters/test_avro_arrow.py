"""Avro records to Arrow columns, every Avro type: the converter's type mapping, with no broker or table.

The registry is the one collaborator, and what the converter asks of it is one schema by id: a small
in-test registry answers that, as the built-in one would.
"""

from __future__ import annotations

import datetime
import decimal
import io
import struct
import uuid

import fastavro
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from tabletopic_plugins.converters.avro_converter import AvroConverter
from tabletopic_plugins.converters.registry_client import FetchedSchema, SchemaNotFound
from tests.avro_orders import EVERY_TYPE, every
from tests.unit.fuzzing import examples

SCHEMA_ID = 7


class _Registry:
    def by_id(self, schema_id: int, schema_type: str = "AVRO") -> FetchedSchema:
        if schema_id != SCHEMA_ID:
            raise SchemaNotFound(f"no schema {schema_id}")
        return FetchedSchema(schema_id, EVERY_TYPE, ())


def _framed(record: dict, schema_id: int = SCHEMA_ID) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(EVERY_TYPE), record)
    return b"\x00" + struct.pack(">I", schema_id) + out.getvalue()


def _convert(values: list[bytes]) -> tuple[pa.Table, list]:
    converter = AvroConverter()
    converter.client = _Registry()  # type: ignore[assignment]
    result = converter.convert("t", values)
    tables = [p.table for p in result.parts]
    return (pa.concat_tables(tables) if tables else pa.table({})), result.failures


def test_every_avro_type_gets_its_arrow_type() -> None:
    table, failures = _convert([_framed(every(i)) for i in range(3)])
    assert failures == []
    types = {f.name: f.type for f in table.schema}
    assert types["id"] == pa.int64() and types["i"] == pa.int32() and types["f"] == pa.float32()
    assert types["b"] == pa.binary() and types["color"] == pa.string() and types["four"] == pa.binary()
    assert types["dec"] == pa.decimal128(10, 2) and types["fdec"] == pa.decimal128(12, 3)
    assert types["day"] == pa.date32() and types["tms"] == pa.int64() and types["tus"] == pa.int64()
    assert types["tsm"] == pa.timestamp("us", tz="UTC") and types["tsu"] == pa.timestamp("us", tz="UTC")
    assert types["local"] == pa.timestamp("us") and types["uid"] == pa.string()
    assert types["tags"] == pa.list_(pa.string()) and types["attrs"] == pa.map_(pa.string(), pa.int64())
    assert pa.types.is_struct(types["inner"]) and pa.types.is_struct(types["either"])
    assert table.schema.field("id").nullable is False and table.schema.field("maybe").nullable is True


def test_every_avro_value_lands_as_written() -> None:
    table, _ = _convert([_framed(every(1))])
    one = table.to_pylist()[0]
    assert one["flag"] is False and one["i"] == -1 and one["f"] == 1.5 and one["maybe"] is None
    assert one["dec"] == decimal.Decimal("1.25") and one["fdec"] == decimal.Decimal("-12.345")
    assert one["day"] == datetime.date(2026, 1, 2)
    assert one["tms"] == ((1 * 60 + 2) * 60 + 3) * 1_000_000 + 4000 and one["tus"] == 86_400_000_000 - 1
    utc = datetime.timezone.utc
    assert one["tsm"] == datetime.datetime(2026, 5, 6, 7, 8, 9, 10_000, utc)
    assert one["local"] == datetime.datetime(2026, 5, 6, 7, 8, 9, 123_456) and one["uid"] == str(uuid.UUID(int=1))
    assert one["attrs"] == [("k", 1)] and one["inner"] == {"x": 1, "shade": "RED", "when": None}
    assert one["either"] == {"long": 1, "string": None}


def test_a_record_that_is_not_in_the_wire_format_or_names_an_unknown_schema_fails_alone() -> None:
    good = _framed(every(2))
    table, failures = _convert([b"plain bytes", good, _framed(every(3), schema_id=99), good[:-3]])
    assert table.num_rows == 1 and table.column("id").to_pylist() == [2]
    reasons = {f.index: f.reason for f in failures}
    assert set(reasons) == {0, 2, 3}
    assert "magic byte" in reasons[0] and "not in the Schema Registry" in reasons[2]


_DECIMALS = {"type": "record", "name": "D", "fields": [
    {"name": "wide", "type": {"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 4}},
    {"name": "fixed", "type": {"type": "fixed", "name": "F", "size": 9, "logicalType": "decimal", "precision": 20,
                               "scale": 0}},
    {"name": "maybe", "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 2}]},
    {"name": "many", "type": {"type": "array", "items": {"type": "bytes", "logicalType": "decimal", "precision": 9,
                                                         "scale": 3}}},
]}


def _decimal(precision: int, scale: int) -> st.SearchStrategy[decimal.Decimal]:
    bound = 10**precision - 1
    return st.integers(-bound, bound).map(lambda unscaled: decimal.Decimal(unscaled).scaleb(-scale))


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.fixed_dictionaries({
    "wide": _decimal(38, 4), "fixed": _decimal(20, 0), "maybe": st.none() | _decimal(6, 2),
    "many": st.lists(_decimal(9, 3), max_size=3)}), min_size=1, max_size=6))
def test_decimals_read_as_bytes_and_finished_by_column_equal_what_was_written(records: list[dict]) -> None:
    """fastavro returns a decimal's bytes, and the converter turns a column of them into decimals
    at once: every width, sign, null and nesting gives back the value written."""
    table, failures = _convert_with(_DECIMALS, [_framed_with(_DECIMALS, r) for r in records])
    assert failures == []
    assert table.to_pylist() == records


def test_a_decimal_past_its_precision_fails_its_record_alone() -> None:
    schema = {"type": "record", "name": "P", "fields": [
        {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 0}}]}
    body = io.BytesIO()
    fastavro.schemaless_writer(body, fastavro.parse_schema({**schema, "fields": [{"name": "d", "type": "bytes"}]}),
                               {"d": (123_456).to_bytes(3, "big", signed=True)})  # 6 digits where 4 fit
    past = b"\x00" + struct.pack(">I", SCHEMA_ID) + body.getvalue()
    fits = _framed_with(schema, {"d": decimal.Decimal(-9999)})
    table, failures = _convert_with(schema, [fits, past, fits])
    assert [f.index for f in failures] == [1] and table.column("d").to_pylist() == [-9999, -9999]


def _framed_with(schema: dict, record: dict) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return b"\x00" + struct.pack(">I", SCHEMA_ID) + out.getvalue()


def _convert_with(schema: dict, values: list[bytes]) -> tuple[pa.Table, list]:
    class Registry:
        def by_id(self, schema_id: int, schema_type: str = "AVRO") -> FetchedSchema:
            return FetchedSchema(schema_id, schema, ())

    converter = AvroConverter()
    converter.client = Registry()  # type: ignore[assignment]
    result = converter.convert("t", values)
    tables = [p.table for p in result.parts]
    return (pa.concat_tables(tables) if tables else pa.table({})), result.failures
