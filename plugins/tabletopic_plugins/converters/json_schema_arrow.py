"""JSON Schema types as Arrow types, and parsed JSON documents as rows of them.

- ``object`` with ``properties`` is a struct of them (in their order); an object with only
  ``additionalProperties`` (a schema) is a map from string; an object that says neither is
  its JSON text, as a string;
- ``array`` is a list of its ``items``; ``integer`` a long (an int where Confluent's
  ``connect.type`` says int8, int16 or int32); ``number`` a double (a float for float32);
  ``boolean``; ``string`` (binary where ``connect.type`` is bytes: base64 text);
- timestamps, as Confluent's JsonSchemaConverter writes Connect's ``Timestamp`` (an integer of
  milliseconds titled ``org.apache.kafka.connect.data.Timestamp``) and as JSON Schema says them
  (a string of ``format: date-time``, RFC 3339), are timestamptz; ``format: date`` is a date;
- ``["null", X]``, and ``oneOf``/``anyOf`` of null and one X, are a nullable X;
- any other ``oneOf``/``anyOf`` is a struct with one optional field per member, as Confluent's
  JsonSchemaConverter and tabletopic's Protobuf ``oneof`` map them. A member is named by its
  ``title``; else an object member with one property (``{"card": ...}``, a tag around one value)
  by that property, and its field holds that value; else by its type (``string``, ``object``,
  ...) where no other member has it; else ``member<i>``, its place. A value fills the field of
  the first member whose type (and, for an object, whose required properties) it has; the
  others are null;
- a ``type`` list of more than one type beside null is the value's JSON text.

``$ref`` is followed, to other subjects too; a recursive schema has no table type and is
refused with its path.
"""

from __future__ import annotations

import base64
import datetime
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from tabletopic.registry.json_schema import JsonSchema

Fix = Callable[[Any], Any]
TIMESTAMP_UTC = pa.timestamp("us", tz="UTC")
_CONNECT_TIMESTAMP = "org.apache.kafka.connect.data.Timestamp"
_CONNECT_INTS = {"int8": pa.int8(), "int16": pa.int16(), "int32": pa.int32(), "int64": pa.int64()}
_MAX_DEPTH = 32


class UnsupportedJsonSchema(ValueError):
    pass


@dataclass(frozen=True)
class DocumentShape:
    """How documents of one schema become rows: the Arrow schema, and the per-value work Arrow cannot do."""

    schema: pa.Schema
    fix: Fix | None  # None: the parsed documents are rows as they are

    def table(self, rows: list[dict[str, Any]]) -> pa.Table:
        return pa.Table.from_pylist(rows, schema=self.schema)

    def row(self, document: Any) -> dict[str, Any]:
        if not isinstance(document, dict):
            raise ValueError(f"the document is a {type(document).__name__}, and the schema's root an object")
        return self.fix(document) if self.fix is not None else document


def document_shape(schema: JsonSchema) -> DocumentShape:
    root, resolver = schema.resolve(schema.root)
    kind, fix = _type(schema, root, resolver, "#", 0)
    if not pa.types.is_struct(kind):
        raise UnsupportedJsonSchema("the schema's root must be an object with properties, to make table columns")
    return DocumentShape(pa.schema(list(kind)), fix)


def _type(schema: JsonSchema, node: Any, resolver: Any, path: str, depth: int) -> tuple[pa.DataType, Fix | None]:
    if depth > _MAX_DEPTH:
        raise UnsupportedJsonSchema(f"{path}: nests deeper than {_MAX_DEPTH} (a recursive schema has no table type)")
    node, resolver = schema.resolve(node, resolver)
    if not isinstance(node, dict):
        return pa.string(), _as_json  # true / {}: anything
    for key in ("oneOf", "anyOf"):
        if isinstance(node.get(key), list):
            branches = [schema.resolve(b, resolver) for b in node[key]]
            real = [(b, r) for b, r in branches if not (isinstance(b, dict) and b.get("type") == "null")]
            if len(real) == 1:
                return _type(schema, real[0][0], real[0][1], f"{path}/{key}", depth + 1)
            if real:
                return _union(schema, real, f"{path}/{key}", depth)
            return pa.string(), _as_json
    kinds = node.get("type")
    if isinstance(kinds, list):
        real_kinds = [k for k in kinds if k != "null"]
        if len(real_kinds) != 1:
            return pa.string(), _as_json
        kinds = real_kinds[0]
    if kinds is None:
        kinds = "object" if "properties" in node else "array" if "items" in node else None
    connect = node.get("connect.type")
    if kinds == "object":
        return _object(schema, node, resolver, path, depth)
    if kinds == "array":
        item_t, item_fix = _type(schema, node.get("items", True), resolver, f"{path}/items", depth + 1)
        if item_fix is None:
            return pa.list_(item_t), None
        return pa.list_(item_t), lambda v: [item_fix(i) if i is not None else None for i in v] \
            if isinstance(v, list) else v
    if kinds == "integer":
        if node.get("title") == _CONNECT_TIMESTAMP:
            return TIMESTAMP_UTC, lambda v: v * 1000 if isinstance(v, int) and not isinstance(v, bool) else v
        return _CONNECT_INTS.get(str(connect), pa.int64()), None
    if kinds == "number":
        return (pa.float32() if connect == "float32" else pa.float64()), None
    if kinds == "boolean":
        return pa.bool_(), None
    if kinds == "string":
        if connect == "bytes":
            return pa.binary(), lambda v: base64.b64decode(v, validate=True) if isinstance(v, str) else v
        if node.get("format") == "date-time":
            return TIMESTAMP_UTC, _instant
        if node.get("format") == "date":
            return pa.date32(), lambda v: datetime.date.fromisoformat(v) if isinstance(v, str) else v
        return pa.string(), None
    return pa.string(), _as_json


def _object(schema: JsonSchema, node: dict[str, Any], resolver: Any, path: str, depth: int
            ) -> tuple[pa.DataType, Fix | None]:
    properties = node.get("properties")
    if isinstance(properties, dict) and properties:
        fields, fixes = [], []
        for name, child in properties.items():
            kind, fix = _type(schema, child, resolver, f"{path}/properties/{name}", depth + 1)
            fields.append(pa.field(name, kind, nullable=True))
            if fix is not None:
                fixes.append((name, fix))
        return pa.struct(fields), (_struct_fix(fixes) if fixes else None)
    extra = node.get("additionalProperties")
    if isinstance(extra, dict) and extra:
        value_t, value_fix = _type(schema, extra, resolver, f"{path}/additionalProperties", depth + 1)
        if value_fix is None:
            return pa.map_(pa.string(), value_t), lambda v: list(v.items()) if isinstance(v, dict) else v
        return pa.map_(pa.string(), value_t), lambda v: [(k, value_fix(x) if x is not None else None)
                                                          for k, x in v.items()] if isinstance(v, dict) else v
    return pa.string(), _as_json


_JSON_TYPES: dict[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
}


def _union(schema: JsonSchema, members: list[tuple[Any, Any]], path: str, depth: int
           ) -> tuple[pa.DataType, Fix | None]:
    """A ``oneOf``/``anyOf`` of several members: a struct with one optional field per member."""
    names = _member_names([m for m, _ in members])
    fields, parts = [], []
    for i, ((member, resolver), name) in enumerate(zip(members, names, strict=True)):
        wrapped = _wrapped(member)
        if wrapped is not None:
            # {"card": ...} or {"iban": ...}: the member is a tag around one value, the field holds that.
            kind, inner = _type(schema, member["properties"][wrapped], resolver,
                                f"{path}/{i}/properties/{wrapped}", depth + 1)
            fix: Fix | None = _unwrap(wrapped, inner)
        else:
            kind, fix = _type(schema, member, resolver, f"{path}/{i}", depth + 1)
        fields.append(pa.field(name, kind, nullable=True))
        parts.append((name, _matcher(member), fix))

    def pick(value: Any) -> Any:
        if value is None:
            return None
        for name, matches, member_fix in parts:
            if matches(value):
                return {n: (member_fix(value) if member_fix is not None else value) if n == name else None
                        for n, _, _ in parts}
        raise ValueError(f"the value matches none of the {len(parts)} members of its oneOf/anyOf")
    return pa.struct(fields), pick


def _unwrap(key: str, inner: Fix | None) -> Fix:
    def fix(value: dict[str, Any]) -> Any:
        held = value.get(key)
        return held if held is None or inner is None else inner(held)
    return fix


def _wrapped(member: Any) -> str | None:
    """The one property of an object member without a title, which the member only wraps."""
    properties = member.get("properties") if isinstance(member, dict) else None
    if _member_type(member) == "object" and not member.get("title") and isinstance(properties, dict) \
            and len(properties) == 1:
        return str(next(iter(properties)))
    return None


def _member_type(member: Any) -> str | None:
    if not isinstance(member, dict):
        return None
    kind = member.get("type")
    if kind is None:
        return "object" if "properties" in member else "array" if "items" in member else None
    return kind if isinstance(kind, str) else None


def _member_names(members: list[Any]) -> list[str]:
    types = [_member_type(m) for m in members]
    names = []
    for i, (member, kind) in enumerate(zip(members, types, strict=True)):
        wrapped = _wrapped(member)
        if isinstance(member, dict) and isinstance(member.get("title"), str) and member["title"]:
            name = member["title"]
        elif wrapped is not None:
            name = wrapped
        elif kind is not None and types.count(kind) == 1:
            name = kind
        else:
            name = f"member{i}"
        names.append(name if name not in names else f"{name}{i}")
    return names


def _matcher(member: Any) -> Callable[[Any], bool]:
    kind = _member_type(member)
    is_kind = _JSON_TYPES.get(kind or "", lambda v: True)
    if kind != "object":
        return is_kind
    required = member.get("required") if isinstance(member.get("required"), list) else []
    properties = member.get("properties") if isinstance(member.get("properties"), dict) else {}
    closed = member.get("additionalProperties") is False
    # An object member named by its one property is chosen by that property's presence.
    needed = list(required) or (list(properties) if len(properties) == 1 else [])
    return lambda v: (is_kind(v) and all(k in v for k in needed)
                      and (not closed or all(k in properties for k in v)))


def _struct_fix(fixes: list[tuple[str, Fix]]) -> Fix:
    def fix(value: Any) -> Any:
        if not isinstance(value, dict):
            return value  # Arrow says what is wrong with it
        out = dict(value)
        for name, f in fixes:
            if out.get(name) is not None:
                out[name] = f(out[name])
        return out
    return fix


def _as_json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, separators=(",", ":"))


def _instant(value: Any) -> Any:
    """An RFC 3339 date-time as a point in time; one without an offset is taken as UTC."""
    if not isinstance(value, str):
        return value  # Arrow says what is wrong with it
    parsed = datetime.datetime.fromisoformat(value)
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=datetime.timezone.utc)
