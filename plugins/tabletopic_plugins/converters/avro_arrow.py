"""Avro types as Arrow types, and the few decoded values Arrow cannot take as they are.

fastavro decodes logical types to Python objects that Arrow accepts directly
(date, datetime, Decimal), except two: time of day, kept as microseconds since
midnight in a long because Spark 3.5 can neither read nor write Iceberg's time
type (the JsonConverter does the same), and uuid, kept as its string form.
Unions of several non-null types become a struct with one field per branch,
as Confluent's AvroConverter makes them.  Only columns that need a change get
a ``fix`` function, so most records go to Arrow untouched.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from tabletopic.registry.avro_schema import AvroSchema, InvalidSchema, deref, kind_of, short_name

Fix = Callable[[Any], Any]
TIMESTAMP_UTC = pa.timestamp("us", tz="UTC")
_PLAIN = {"boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(), "float": pa.float32(),
          "double": pa.float64(), "bytes": pa.binary(), "string": pa.string(), "null": pa.string()}
_MAX_DECIMAL_PRECISION = 38  # Iceberg's limit


@dataclass(frozen=True)
class Column:
    arrow: pa.DataType
    optional: bool
    fix: Fix | None = None


def record_columns(schema: AvroSchema) -> tuple[pa.Schema, Fix | None]:
    """The table schema for records of ``schema``, and a per-row fix if any column needs one.

    A top-level schema that is not a record becomes one column, ``value``.
    """
    node, namespace = deref(schema.root, None, schema)
    if kind_of(node) == "record":
        fields = [(f["name"], compile_type(f["type"], namespace, schema)) for f in node["fields"]]
        arrow = pa.schema([pa.field(n, c.arrow, nullable=c.optional) for n, c in fields])
        fixes = [(n, c.fix) for n, c in fields if c.fix is not None]
        if not fixes:
            return arrow, None

        def fix_row(row: dict[str, Any]) -> dict[str, Any]:
            for name, fix in fixes:
                value = row.get(name)
                if value is not None:
                    row[name] = fix(value)
            return row
        return arrow, fix_row
    column = compile_type(schema.root, None, schema)
    value_fix = column.fix
    arrow = pa.schema([pa.field("value", column.arrow, nullable=column.optional)])
    if value_fix is None:
        return arrow, lambda value: {"value": value}
    return arrow, lambda value: {"value": None if value is None else value_fix(value)}


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
            return Column(inner.arrow, optional, inner.fix)
        return _union(branches, namespace, schema, depth, optional)
    if isinstance(node, str):
        return Column(_PLAIN[node], node == "null")
    logical = node.get("logicalType")
    if logical is not None:
        column = _logical(node, kind, str(logical))
        if column is not None:
            return column
    if kind == "record":
        fields = [(f["name"], compile_type(f["type"], namespace, schema, depth + 1)) for f in node["fields"]]
        arrow = pa.struct([pa.field(n, c.arrow, nullable=True) for n, c in fields])
        fixes = [(n, c.fix) for n, c in fields if c.fix is not None]
        return Column(arrow, False, _struct_fix(fixes) if fixes else None)
    if kind == "enum":
        return Column(pa.string(), False)
    if kind == "fixed":
        return Column(pa.binary(), False)
    if kind == "array":
        item = compile_type(node["items"], namespace, schema, depth + 1)
        item_fix = item.fix
        fix = None if item_fix is None else (lambda v: [None if x is None else item_fix(x) for x in v])
        return Column(pa.list_(pa.field("element", item.arrow)), False, fix)
    if kind == "map":
        value = compile_type(node["values"], namespace, schema, depth + 1)
        value_fix = value.fix
        fix = None if value_fix is None else (
            lambda m: {k: None if x is None else value_fix(x) for k, x in m.items()})
        return Column(pa.map_(pa.string(), value.arrow), False, fix)
    return Column(_PLAIN[kind], False)


def _logical(node: dict[str, Any], kind: str, logical: str) -> Column | None:
    """Logical types; one on the wrong underlying type is ignored, as the Avro spec says."""
    if logical == "decimal" and kind in ("bytes", "fixed"):
        precision, scale = int(node.get("precision", 0)), int(node.get("scale", 0))
        if not 0 < precision <= _MAX_DECIMAL_PRECISION:
            raise InvalidSchema(f"decimal precision {precision} is outside Iceberg's 1..38")
        return Column(pa.decimal128(precision, scale), False)
    if logical == "date" and kind == "int":
        return Column(pa.date32(), False)
    if (logical, kind) in (("time-millis", "int"), ("time-micros", "long")):
        return Column(pa.int64(), False, _micros_of_day)
    if logical in ("timestamp-millis", "timestamp-micros") and kind == "long":
        return Column(TIMESTAMP_UTC, False)
    if logical in ("local-timestamp-millis", "local-timestamp-micros") and kind == "long":
        return Column(pa.timestamp("us"), False)
    if logical == "uuid" and kind in ("string", "fixed"):
        return Column(pa.string(), False, str)
    return None


def _micros_of_day(value: Any) -> int:
    if isinstance(value, datetime.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond
    return int(value)


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
        name = short_name(node) if kind in ("record", "enum", "fixed") else kind
        compiled.append((name, kind, compile_type(branch, namespace, schema, depth + 1), node))
    arrow = pa.struct([pa.field(n, c.arrow, nullable=True) for n, _, c, _ in compiled])

    def pick(value: Any) -> dict[str, Any]:
        for name, kind, column, node in compiled:
            if _fits(value, kind, node):
                return {name: column.fix(value) if column.fix else value}
        raise ValueError(f"value {value!r} matches no branch of its union")
    return Column(arrow, optional, pick)


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
