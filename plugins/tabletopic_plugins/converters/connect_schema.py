"""Kafka Connect schemas (the JSON ``schema`` envelope) as Arrow types.

Each Connect schema compiles to a :class:`Node` with two Arrow types: ``wire``,
what Arrow's JSON reader can parse straight from the payload text, and
``final``, what the table gets.  They differ only where Connect's JSON encoding
does: Timestamp (epoch millis), Date (epoch days), Time (millis of the day),
Decimal and bytes (base64 strings).  ``finish`` turns the one into the other,
touching only the columns that need it.
"""

from __future__ import annotations

import base64
import decimal
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tabletopic.convert.nested_arrays import list_with, struct_with

DECIMAL = "org.apache.kafka.connect.data.Decimal"
DATE = "org.apache.kafka.connect.data.Date"
TIME = "org.apache.kafka.connect.data.Time"
TIMESTAMP = "org.apache.kafka.connect.data.Timestamp"

_PRIMITIVES: dict[str, pa.DataType] = {
    "int8": pa.int32(), "int16": pa.int32(), "int32": pa.int32(), "int64": pa.int64(),
    "float32": pa.float32(), "float64": pa.float64(), "boolean": pa.bool_(), "string": pa.string(),
}
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")


class SchemaError(ValueError):
    pass


@dataclass
class Node:
    wire: pa.DataType
    final: pa.DataType
    optional: bool
    kind: str = "plain"  # plain, timestamp, date, time, decimal, bytes, struct, array, map
    children: list[tuple[str, Node]] = field(default_factory=list)
    needs_finish: bool = False
    needs_python: bool = False  # maps and bytes inside lists: Arrow's JSON reader cannot parse them

    def field(self, name: str, top_level: bool) -> pa.Field:
        # Nested fields stay nullable so that one null deep inside never fails a Parquet write;
        # top-level required-ness is checked per record in finish_top.
        return pa.field(name, self.final, nullable=self.optional or not top_level)


def compile_schema(schema: Any) -> Node:
    if not isinstance(schema, dict) or "type" not in schema:
        raise SchemaError("a Connect schema must be an object with a 'type'")
    kind, name, optional = schema["type"], schema.get("name"), bool(schema.get("optional", False))
    if name == TIMESTAMP:
        return Node(pa.int64(), TIMESTAMP_TYPE, optional, "timestamp", needs_finish=True)
    if name == DATE:
        return Node(pa.int32(), pa.date32(), optional, "date", needs_finish=True)
    if name == TIME:
        # Spark 3.5 can neither read nor write Iceberg's time type, so time of day is
        # kept as microseconds since midnight in a long (time's own representation).
        return Node(pa.int64(), pa.int64(), optional, "time", needs_finish=True)
    if name == DECIMAL:
        params = schema.get("parameters") or {}
        scale = int(params.get("scale", 0))
        precision = int(params.get("connect.decimal.precision", 38))
        return Node(pa.string(), pa.decimal128(precision, scale), optional, "decimal", needs_finish=True)
    if kind in _PRIMITIVES:
        return Node(_PRIMITIVES[kind], _PRIMITIVES[kind], optional)
    if kind == "bytes":
        return Node(pa.string(), pa.binary(), optional, "bytes", needs_finish=True)
    if kind == "struct":
        children = [(f["field"], compile_schema(f)) for f in schema.get("fields", [])]
        names = [n for n, _ in children]
        if len(set(names)) != len(names):
            # Connect's SchemaBuilder refuses it too; Arrow's JSON reader would crash on such a schema.
            twice = sorted({n for n in names if names.count(n) > 1})
            raise SchemaError(f"a struct names the field(s) {twice} more than once")
        wire = pa.struct([pa.field(n, c.wire) for n, c in children])
        final = pa.struct([c.field(n, top_level=False) for n, c in children])
        return Node(wire, final, optional, "struct", children,
                    needs_finish=any(c.needs_finish for _, c in children),
                    needs_python=any(c.needs_python for _, c in children))
    if kind == "array":
        item = compile_schema(schema.get("items"))
        return Node(pa.list_(item.wire), pa.list_(item.final), optional, "array", [("element", item)],
                    needs_finish=item.needs_finish, needs_python=item.needs_python or item.kind == "bytes")
    if kind == "map":
        key, value = compile_schema(schema.get("keys")), compile_schema(schema.get("values"))
        return Node(pa.map_(key.wire, value.wire), pa.map_(key.final, value.final), optional, "map",
                    [("key", key), ("value", value)], needs_finish=True, needs_python=True)
    raise SchemaError(f"unsupported Connect schema type {kind!r}")


def finish(array: pa.Array, node: Node) -> pa.Array:
    """Turn an array parsed with ``node.wire`` into ``node.final``."""
    if not node.needs_finish:
        return array
    if node.kind == "timestamp":
        return pc.cast(pc.cast(array, pa.timestamp("ms", tz="UTC")), TIMESTAMP_TYPE)
    if node.kind == "date":
        return pc.cast(array, pa.date32())
    if node.kind == "time":
        return pc.multiply(pc.cast(array, pa.int64()), 1000)
    if node.kind == "decimal":
        return pa.array([_decimal(v, node.final) for v in array.to_pylist()], node.final)
    if node.kind == "bytes":
        return pa.array([None if v is None else base64.b64decode(v, validate=True) for v in array.to_pylist()],
                        pa.binary())
    if node.kind == "struct":
        struct = array.cast(node.wire) if array.type != node.wire else array
        children = [finish(struct.field(i), child) for i, (_, child) in enumerate(node.children)]
        return struct_with(struct, children, node.final)
    if node.kind == "array":
        return list_with(array, finish(array.flatten(), node.children[0][1]), node.final)
    if node.kind == "map":
        return pa.array(array.to_pylist(), node.final)
    return array


def _decimal(value: Any, dtype: pa.Decimal128Type) -> decimal.Decimal | None:
    if value is None:
        return None
    if isinstance(value, (int, float)) or (isinstance(value, str) and _looks_numeric(value)):
        return decimal.Decimal(str(value))  # decimal.format=NUMERIC
    unscaled = int.from_bytes(base64.b64decode(value, validate=True), "big", signed=True)
    return decimal.Decimal(unscaled).scaleb(-dtype.scale)


def _looks_numeric(text: str) -> bool:
    return bool(text) and text.lstrip("-").replace(".", "", 1).isdigit() and not text.endswith("=")


def to_wire_python(value: Any, node: Node) -> Any:
    """Slow path: shape one JSON value for ``pa.array(..., node.wire)`` (maps as item lists)."""
    if value is None:
        return None
    if node.kind == "struct":
        if not isinstance(value, dict):
            raise SchemaError("expected an object for a struct")
        return {n: to_wire_python(value.get(n), c) for n, c in node.children}
    if node.kind == "array":
        return [to_wire_python(v, node.children[0][1]) for v in value]
    if node.kind == "map":
        key, val = node.children[0][1], node.children[1][1]
        items = value.items() if isinstance(value, dict) else value
        return [(to_wire_python(k, key), to_wire_python(v, val)) for k, v in items]
    if node.kind == "decimal" and isinstance(value, (int, float)):
        return str(value)
    return value
