"""``org.apache.iceberg.connect.transforms.JsonToMapTransform``: a JSON string value (from StringConverter)
becomes a struct, as the Iceberg sink's transform makes it.

As the Iceberg sink's:

* ``json.root=true``: one field, ``payload``, a map of the object's keys to strings.
* ``json.root=false`` (default): a field per key, typed by its JSON value: a string, a boolean, an int32,
  int64 or (beyond) a decimal of scale 0, a double; a non-empty object is a map of strings; an array of
  one JSON type is an array of it (objects: of maps of strings), of mixed types an array of strings.
  A null, an empty object or an empty array adds no field.
* In a map of strings, a string is itself and any other value its JSON text (``null`` for null).
* A value that is not a string fails ("use StringConverter"), as does text that is not a JSON object.

A number's JSON text is Java's: ``1.0E10``, not ``10000000000.0``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa

from tabletopic.convert.java_text import java_double
from tabletopic.convert.records import SinkRecords, no_columns
from tabletopic.transform.chain import RowsFailed, every_record
from tabletopic_plugins.transforms.connect_record import VALUE, flag, operand

_STRING_MAP = pa.map_(pa.string(), pa.string())
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)


def java_json(value: Any) -> str:
    """Jackson's compact JSON text of a parsed value."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, float):
        return java_double(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ",".join(java_json(v) for v in value) + "]"
    return "{" + ",".join(f"{json.dumps(k, ensure_ascii=False)}:{java_json(v)}" for k, v in value.items()) + "}"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else java_json(value)


def _node(value: Any) -> str:
    """Jackson's node class for a parsed value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "int" if _INT32[0] <= value <= _INT32[1] else "long" if _INT64[0] <= value <= _INT64[1] else "bigint"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "array"
    return "object"


_PRIMITIVE_TYPES = {"boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(), "bigint": pa.decimal128(38, 0),
                    "double": pa.float64(), "text": pa.string()}


def field_type(value: Any) -> pa.DataType | None:
    """The type JsonToMapUtils gives a value; None where it adds no field."""
    node = _node(value)
    if node == "null":
        return None
    if node == "object":
        return _STRING_MAP if value else None
    if node == "array":
        return _array_type(value)
    return _PRIMITIVE_TYPES[node]


def _array_type(items: list[Any]) -> pa.DataType | None:
    if not items:
        return None
    nodes = {_node(i) for i in items}
    if len(nodes) > 1 or nodes == {"null"}:
        return pa.list_(pa.string())
    node = next(iter(nodes))
    if node == "object":
        return pa.list_(_STRING_MAP)
    if node == "array":
        nested = {str(field_type(i)) for i in items}
        if len(nested) > 1:
            return pa.list_(pa.list_(pa.string()))
        inner = field_type(items[0])
        return pa.list_(inner) if inner is not None else None
    return pa.list_(_PRIMITIVE_TYPES[node])


def _value(value: Any, arrow: pa.DataType) -> Any:
    if value is None:
        return None
    if arrow == _STRING_MAP:
        return [(k, _text(v)) for k, v in value.items()] if isinstance(value, dict) else None
    if pa.types.is_list(arrow):
        return [_value(v, arrow.value_type) for v in value] if isinstance(value, list) else None
    if pa.types.is_string(arrow):
        return _text(value)
    if pa.types.is_decimal(arrow):
        return Decimal(value)
    if pa.types.is_int32(arrow) or pa.types.is_int64(arrow):
        return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
    if pa.types.is_float64(arrow):
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
    if pa.types.is_boolean(arrow):
        return value if isinstance(value, bool) else False
    return value


class JsonToMapTransform:
    keys = frozenset(("json.root",))

    def configure(self, props: Mapping[str, str]) -> None:
        self.at_root = flag(props, "json.root", False)

    def apply(self, records: SinkRecords) -> list[SinkRecords] | SinkRecords:
        table = operand(records, VALUE)
        if table is None:
            return records
        if not records.primitive or not pa.types.is_string(table.column(0).type):
            raise every_record(records, "record value is not a string, use StringConverter")
        texts = table.column(0).to_pylist()
        rows: list[dict[str, Any]] = []
        failed = np.zeros(len(records), dtype=bool)
        reasons = []
        for i, text_value in enumerate(texts):
            try:
                parsed = json.loads(text_value)
            except ValueError:
                failed[i] = True
                reasons.append(f"record.value is not valid json for record.value: topic {records.topic} partition "
                               f"{records.partition} offset {int(records.offsets[i])}")
                rows.append({})
                continue
            if not isinstance(parsed, dict):
                failed[i] = True
                reasons.append(f"Expected json object for record.value after parsing: topic {records.topic} "
                               f"partition {records.partition} offset {int(records.offsets[i])}")
                rows.append({})
                continue
            rows.append(parsed)
        if failed.any():
            raise RowsFailed(failed, reasons)
        if self.at_root:
            payload = pa.array([[(k, _text(v)) for k, v in row.items()] for row in rows], _STRING_MAP)
            return replace(records.with_value(pa.table({"payload": payload}), False), schemaless=False)
        groups: dict[tuple[tuple[str, str], ...], tuple[pa.Schema, list[int]]] = {}
        for i, row in enumerate(rows):
            fields = [pa.field(k, t) for k, v in row.items() if (t := field_type(v)) is not None]
            signature = tuple((f.name, str(f.type)) for f in fields)
            groups.setdefault(signature, (pa.schema(fields), []))[1].append(i)
        out = []
        for schema, members in groups.values():
            mask = np.zeros(len(records), dtype=bool)
            mask[members] = True
            part = records if mask.all() else records.take(mask)
            columns = [pa.array([_value(rows[i].get(f.name), f.type) for i in members], f.type) for f in schema]
            value = pa.Table.from_arrays(columns, schema=schema) if columns else no_columns(len(members))
            out.append(replace(part.with_value(value, False), schemaless=False))
        return out
