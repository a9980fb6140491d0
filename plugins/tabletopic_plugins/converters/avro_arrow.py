"""Avro types as Arrow types, and how decoded records become those types.

Decoding is fastavro's; building Python ``datetime`` objects for every
timestamp, only for Arrow to take them apart again, is not.  So the schema
fastavro decodes with (:func:`raw_schema`) drops the logical types of dates,
times and timestamps, fastavro returns their integers, Arrow reads those as
plain ints (the ``wire`` type) and :func:`finish` casts whole columns to the
``final`` type.  Decimals are read the same way: fastavro returns their bytes (a
``Decimal`` object each cost a fifth of its decode) and :func:`finish` turns a
whole column of them into Arrow's decimals at once.  Uuids keep fastavro's
conversion.

Time of day becomes microseconds since midnight in a long, because Spark 3.5
can neither read nor write Iceberg's time type (the JsonConverter does the
same).  Unions of several non-null types become a struct with one field per
branch, as Confluent's AvroConverter makes them; picking the branch is the one
step that stays per record (``fix``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tabletopic.convert.nested_arrays import list_with, struct_with
from tabletopic.registry.avro_schema import NAMED, PRIMITIVES, AvroSchema, InvalidSchema, deref, kind_of, short_name

Fix = Callable[[Any], Any]
TIMESTAMP_UTC = pa.timestamp("us", tz="UTC")
_PLAIN = {"boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(), "float": pa.float32(),
          "double": pa.float64(), "bytes": pa.binary(), "string": pa.string(), "null": pa.string()}
_MAX_DECIMAL_PRECISION = 38  # Iceberg's limit
# Logical types decoded as their integers and finished by Arrow; (logical type, underlying type).
_RAW = {("date", "int"), ("time-millis", "int"), ("time-micros", "long"), ("timestamp-millis", "long"),
        ("timestamp-micros", "long"), ("local-timestamp-millis", "long"), ("local-timestamp-micros", "long"),
        ("uuid", "string"), ("decimal", "bytes"), ("decimal", "fixed")}
_DECIMAL_BYTES = 16  # a decimal128's unscaled integer


@dataclass
class Column:
    wire: pa.DataType  # what the decoded Python values are, as Arrow reads them
    final: pa.DataType  # what the table gets
    optional: bool
    kind: str = "plain"  # plain, cast, millis (a timestamp in ms), time-millis, decimal, struct, list, map
    children: list[tuple[str, Column]] = field(default_factory=list)
    fix: Fix | None = None  # per-value work before Arrow (union branches only)

    @property
    def needs_finish(self) -> bool:
        return self.wire != self.final or self.kind == "time-millis"


@dataclass(frozen=True)
class RecordShape:
    """How decoded records of one schema become an Arrow table."""

    wire: pa.Schema
    final: pa.Schema
    columns: list[Column]
    fix: Fix | None  # per row, or None when no column needs Python work
    record: bool  # False: a top-level primitive, wrapped as the column ``value``

    def finish(self, table: pa.Table) -> pa.Table:
        arrays = [finish(table.column(i).combine_chunks(), c) for i, c in enumerate(self.columns)]
        return pa.Table.from_arrays(arrays, schema=self.final)


def raw_schema(node: Any) -> Any:
    """A copy of an Avro schema (JSON) without the logical types that :func:`finish` applies instead."""
    if isinstance(node, list):
        return [raw_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: raw_schema(v) if k in ("type", "items", "values") else v for k, v in node.items()}
    if "fields" in node:
        out["fields"] = [{**f, "type": raw_schema(f["type"])} for f in node["fields"]]
    if (node.get("logicalType"), node.get("type")) in _RAW:
        del out["logicalType"]
    return out


def record_shape(schema: AvroSchema) -> RecordShape:
    node, namespace = deref(schema.root, None, schema)
    if kind_of(node) == "record":
        named = [(f["name"], compile_type(f["type"], namespace, schema)) for f in node["fields"]]
        record = True
    else:
        named = [("value", compile_type(schema.root, None, schema))]
        record = False
    wire = pa.schema([pa.field(n, c.wire) for n, c in named])
    final = pa.schema([pa.field(n, c.final, nullable=c.optional) for n, c in named])
    fixes = [(n, c.fix) for n, c in named if c.fix is not None]
    fix: Fix | None = None
    if not record:
        value_fix = named[0][1].fix
        fix = (lambda v: {"value": v}) if value_fix is None else \
            (lambda v: {"value": None if v is None else value_fix(v)})
    elif fixes:
        fix = _struct_fix(fixes)
    return RecordShape(wire, final, [c for _, c in named], fix, record)


def compile_type(node: Any, namespace: str | None, schema: AvroSchema, depth: int = 0) -> Column:
    if depth > 64:
        raise InvalidSchema("a recursive Avro type cannot be a table column")
    node, namespace = deref(node, namespace, schema)
    kind = kind_of(node)
    if kind == "union":
        branches = [b for b in node if deref(b, namespace, schema)[0] != "null"]
        optional = len(branches) < len(node)
        if len(branches) == 1:
            inner = compile_type(branches[0], namespace, schema, depth + 1)
            inner.optional = optional
            return inner
        return _union(branches, namespace, schema, depth, optional)
    if isinstance(node, str):
        return Column(_PLAIN[node], _PLAIN[node], node == "null")
    logical = node.get("logicalType")
    if logical is not None:
        column = _logical(node, kind, str(logical))
        if column is not None:
            return column
    if kind == "record":
        children = [(f["name"], compile_type(f["type"], namespace, schema, depth + 1)) for f in node["fields"]]
        fixes = [(n, c.fix) for n, c in children if c.fix is not None]
        return Column(pa.struct([pa.field(n, c.wire) for n, c in children]),
                      pa.struct([pa.field(n, c.final, nullable=True) for n, c in children]), False, "struct",
                      children, _struct_fix(fixes) if fixes else None)
    if kind in ("enum", "fixed"):
        t = pa.string() if kind == "enum" else pa.binary()
        return Column(t, t, False)
    if kind == "array":
        item = compile_type(node["items"], namespace, schema, depth + 1)
        item_fix = item.fix
        fix: Callable[[Any], Any] | None = None if item_fix is None else (
            lambda v: [None if x is None else item_fix(x) for x in v])
        return Column(pa.list_(pa.field("element", item.wire)), pa.list_(pa.field("element", item.final)), False,
                      "list", [("element", item)], fix)
    if kind == "map":
        value = compile_type(node["values"], namespace, schema, depth + 1)
        value_fix = value.fix
        fix = None if value_fix is None else (
            lambda m: {k: None if x is None else value_fix(x) for k, x in m.items()})
        return Column(pa.map_(pa.string(), value.wire), pa.map_(pa.string(), value.final), False, "map",
                      [("value", value)], fix)
    if kind in PRIMITIVES:
        return Column(_PLAIN[kind], _PLAIN[kind], False)
    raise InvalidSchema(f"unsupported Avro type {kind!r}")


def _logical(node: dict[str, Any], kind: str, logical: str) -> Column | None:
    """Logical types; one on the wrong underlying type is ignored, as the Avro spec says."""
    if logical == "decimal" and kind in ("bytes", "fixed"):
        precision, scale = int(node.get("precision", 0)), int(node.get("scale", 0))
        if not 0 < precision <= _MAX_DECIMAL_PRECISION:
            raise InvalidSchema(f"decimal precision {precision} is outside Iceberg's 1..38")
        return Column(pa.binary(), pa.decimal128(precision, scale), False, "decimal")
    if (logical, kind) not in _RAW:
        return None
    if logical == "date":
        return Column(pa.int32(), pa.date32(), False, "cast")
    if logical == "time-millis":
        return Column(pa.int32(), pa.int64(), False, "time-millis")
    if logical == "time-micros":
        return Column(pa.int64(), pa.int64(), False)
    if logical == "uuid":
        return Column(pa.string(), pa.string(), False)
    final = TIMESTAMP_UTC if logical.startswith("timestamp") else pa.timestamp("us")
    return Column(pa.int64(), final, False, "millis" if logical.endswith("millis") else "cast")


def finish(array: pa.Array, column: Column) -> pa.Array:
    """Turn an array read with ``column.wire`` into ``column.final``, a whole column at a time."""
    if not column.needs_finish:
        return array
    if column.kind == "millis":
        return array.cast(pa.timestamp("ms", tz=column.final.tz)).cast(column.final)
    if column.kind == "cast":
        return array.cast(column.final)
    if column.kind == "time-millis":
        return pc.multiply(array.cast(pa.int64()), 1000)
    if column.kind == "decimal":
        return decimals(array, column.final)
    if column.kind == "struct":
        children = [finish(array.field(i), c) for i, (_, c) in enumerate(column.children)]
        return struct_with(array, children, column.final)
    if column.kind == "list":
        return list_with(array, finish(array.flatten(), column.children[0][1]), column.final)
    if column.kind == "map":
        items = finish(array.items, column.children[0][1])
        return pa.MapArray.from_arrays(array.offsets, array.keys, items, type=column.final, mask=array.is_null())
    return array.cast(column.final)


def decimals(array: pa.Array, final: pa.Decimal128Type) -> pa.Array:
    """Avro decimals, each its unscaled integer in big-endian two's complement in as many bytes as it
    takes, as ``final``. A value past ``final``'s precision, or of more than 16 bytes, raises, so that
    the record holding it fails alone."""
    n = len(array)
    offsets = np.frombuffer(array.buffers()[1], dtype=np.int32)[array.offset:array.offset + n + 1]
    lengths = np.diff(offsets)
    if (lengths > _DECIMAL_BYTES).any():
        raise ValueError(f"a decimal of more than {_DECIMAL_BYTES} bytes is past any precision Iceberg takes")
    data_buffer = array.buffers()[2]
    data = np.frombuffer(data_buffer, dtype=np.uint8)[offsets[0]:offsets[-1]] if data_buffer is not None \
        else np.zeros(0, dtype=np.uint8)
    starts = offsets[:-1] - offsets[0]
    # Right-aligned in 16 big-endian bytes, the rest filled with the sign, then read little-endian.
    wide = np.zeros((n, _DECIMAL_BYTES), dtype=np.uint8)
    some = lengths > 0
    wide[some] = np.where(data[starts[some], None] >= 0x80, 0xFF, 0)
    rows = np.repeat(np.arange(n), lengths)
    columns = np.arange(len(data)) - np.repeat(starts, lengths) + np.repeat(_DECIMAL_BYTES - lengths, lengths)
    wide[rows, columns] = data
    widest = pa.Array.from_buffers(pa.decimal128(38, final.scale), n,
                                   [None, pa.py_buffer(np.ascontiguousarray(wide[:, ::-1]))])
    if array.null_count:
        widest = pc.if_else(array.is_valid(), widest, pa.scalar(None, widest.type))
    return widest.cast(final)


def _struct_fix(fixes: list[tuple[str, Fix]]) -> Fix:
    def fix(value: dict[str, Any]) -> dict[str, Any]:
        for name, f in fixes:
            inner = value.get(name)
            if inner is not None:
                value[name] = f(inner)
        return value
    return fix


def _union(branches: list[Any], namespace: str | None, schema: AvroSchema, depth: int, optional: bool) -> Column:
    """A struct with one field per branch, set for the branch the value came from."""
    compiled: list[tuple[str, str, Column, Any]] = []
    for branch in branches:
        node, _ = deref(branch, namespace, schema)
        kind = kind_of(node)
        name = short_name(node) if kind in NAMED else kind
        compiled.append((name, kind, compile_type(branch, namespace, schema, depth + 1), node))

    def pick(value: Any) -> dict[str, Any]:
        for name, kind, column, node in compiled:
            if _fits(value, kind, node):
                return {name: column.fix(value) if column.fix else value}
        raise ValueError(f"value {value!r} matches no branch of its union")
    return Column(pa.struct([pa.field(n, c.wire) for n, _, c, _ in compiled]),
                  pa.struct([pa.field(n, c.final, nullable=True) for n, _, c, _ in compiled]), optional, "struct",
                  [(n, c) for n, _, c, _ in compiled], pick)


def _fits(value: Any, kind: str, node: Any) -> bool:
    if kind == "boolean":
        return isinstance(value, bool)
    if kind in ("int", "long"):
        return isinstance(value, int) and not isinstance(value, bool)
    if kind in ("float", "double"):
        return isinstance(value, float)
    if kind in ("string", "enum"):
        return isinstance(value, str) and (kind == "string" or value in node["symbols"])
    if kind in ("bytes", "fixed"):
        return isinstance(value, bytes)
    if kind == "record":
        return isinstance(value, dict) and set(value) <= {f["name"] for f in node["fields"]}
    if kind == "map":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    return True
