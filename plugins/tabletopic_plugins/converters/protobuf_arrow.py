"""Protobuf message types as Arrow types, and decoded messages as rows of them.

The mapping follows Confluent's ProtobufConverter where a table needs a choice:
- int32, sint32 and sfixed32 are int; uint32 and fixed32 are long (they do not fit an int);
  64-bit integers, unsigned ones too, are long; enums are their names, as strings;
- a message is a struct, a repeated field a list, a ``map<K, V>`` a map;
- a ``oneof`` is a struct named after it, holding its members, at most one of them set;
- a field with presence (``optional``, a message, a oneof member) is null when unset; a proto3
  scalar without presence is its default, as the wire format says it is;
- well-known types: ``Timestamp`` is a timestamp (UTC, microseconds), ``google.type.Date`` a
  date, the wrappers (``Int64Value``, ...) their nullable value, ``Struct``, ``Value`` and
  ``ListValue`` a JSON string.

A recursive message type cannot become an Arrow type; its schema is refused with its name.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor

TIMESTAMP_UTC = pa.timestamp("us", tz="UTC")
_EPOCH = datetime.date(1970, 1, 1)
Get = Callable[[Any], Any]  # a message -> its value for one column

_SCALARS: dict[int, pa.DataType] = {
    FieldDescriptor.TYPE_INT32: pa.int32(), FieldDescriptor.TYPE_SINT32: pa.int32(),
    FieldDescriptor.TYPE_SFIXED32: pa.int32(), FieldDescriptor.TYPE_UINT32: pa.int64(),
    FieldDescriptor.TYPE_FIXED32: pa.int64(), FieldDescriptor.TYPE_INT64: pa.int64(),
    FieldDescriptor.TYPE_SINT64: pa.int64(), FieldDescriptor.TYPE_SFIXED64: pa.int64(),
    FieldDescriptor.TYPE_UINT64: pa.int64(), FieldDescriptor.TYPE_FIXED64: pa.int64(),
    FieldDescriptor.TYPE_FLOAT: pa.float32(), FieldDescriptor.TYPE_DOUBLE: pa.float64(),
    FieldDescriptor.TYPE_BOOL: pa.bool_(), FieldDescriptor.TYPE_STRING: pa.string(),
    FieldDescriptor.TYPE_BYTES: pa.binary(), FieldDescriptor.TYPE_ENUM: pa.string(),
}
_WRAPPERS = {f"google.protobuf.{name}Value": kind for name, kind in (
    ("Double", pa.float64()), ("Float", pa.float32()), ("Int64", pa.int64()), ("UInt64", pa.int64()),
    ("Int32", pa.int32()), ("UInt32", pa.int64()), ("Bool", pa.bool_()), ("String", pa.string()),
    ("Bytes", pa.binary()))}
_JSON_TYPES = {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"}


class UnsupportedProtobuf(ValueError):
    pass


@dataclass(frozen=True)
class MessageShape:
    """How messages of one type become rows: the Arrow schema and one getter per column."""

    schema: pa.Schema
    getters: tuple[tuple[str, Get], ...]

    def row(self, message: Any) -> dict[str, Any]:
        return {name: get(message) for name, get in self.getters}


def message_shape(descriptor: Descriptor) -> MessageShape:
    fields, getters = _members(descriptor, (descriptor.full_name,))
    return MessageShape(pa.schema(fields), tuple(getters))


def _members(descriptor: Descriptor, path: tuple[str, ...]) -> tuple[list[pa.Field], list[tuple[str, Get]]]:
    fields: list[pa.Field] = []
    getters: list[tuple[str, Get]] = []
    oneofs_done: set[str] = set()
    for f in descriptor.fields:
        oneof = f.containing_oneof
        if oneof is not None and not _synthetic(oneof):
            if oneof.name in oneofs_done:
                continue
            oneofs_done.add(oneof.name)
            members = [_field(m, path) for m in oneof.fields]
            struct = pa.struct([pa.field(m.name, t, nullable=True) for m, (t, _) in zip(oneof.fields, members,
                                                                                         strict=True)])
            fields.append(pa.field(oneof.name, struct, nullable=True))
            getters.append((oneof.name, _oneof_getter(oneof.name, [(m.name, g) for m, (_, g) in
                                                                  zip(oneof.fields, members, strict=True)])))
            continue
        kind, get = _field(f, path)
        fields.append(pa.field(f.name, kind, nullable=True))
        getters.append((f.name, get))
    return fields, getters


def _synthetic(oneof: Any) -> bool:
    """A proto3 ``optional`` is a oneof of one field that the compiler made; it is not a oneof to the user."""
    return len(oneof.fields) == 1 and getattr(oneof.fields[0], "has_presence", False) and \
        oneof.name == f"_{oneof.fields[0].name}"


def _field(f: FieldDescriptor, path: tuple[str, ...]) -> tuple[pa.DataType, Get]:
    name = f.name
    if _is_map(f):
        key_f, value_f = f.message_type.fields_by_name["key"], f.message_type.fields_by_name["value"]
        key_t, key_get = _value(key_f, path)
        value_t, value_get = _value(value_f, path)
        return pa.map_(key_t, value_t), lambda m: [(key_get(k), value_get(v)) for k, v in _map_items(getattr(m, name))]
    if f.is_repeated:
        item_t, item_get = _value(f, path)
        return pa.list_(item_t), lambda m: [item_get(v) for v in getattr(m, name)]
    kind, convert = _value(f, path)
    if f.type == FieldDescriptor.TYPE_MESSAGE or getattr(f, "has_presence", False):
        return kind, lambda m: convert(getattr(m, name)) if m.HasField(name) else None
    return kind, lambda m: convert(getattr(m, name))


def _map_items(value: Any) -> list[tuple[Any, Any]]:
    return list(value.items())


def _value(f: FieldDescriptor, path: tuple[str, ...]) -> tuple[pa.DataType, Get]:
    """The Arrow type of one value of ``f`` (an item, for a repeated field) and its conversion."""
    if f.type == FieldDescriptor.TYPE_MESSAGE:
        return _message(f.message_type, path)
    if f.type == FieldDescriptor.TYPE_ENUM:
        enum = f.enum_type
        return pa.string(), lambda v: enum.values_by_number[v].name if v in enum.values_by_number else str(v)
    kind = _SCALARS.get(f.type)
    if kind is None:
        raise UnsupportedProtobuf(f"field {f.full_name} has a type ({f.type}) that has no column type")
    return kind, _same


def _same(v: Any) -> Any:
    return v


def _message(descriptor: Descriptor, path: tuple[str, ...]) -> tuple[pa.DataType, Get]:
    name = descriptor.full_name
    if name == "google.protobuf.Timestamp":
        return TIMESTAMP_UTC, lambda v: v.seconds * 1_000_000 + v.nanos // 1000
    if name == "google.type.Date":
        return pa.date32(), lambda v: (datetime.date(v.year, v.month, v.day) - _EPOCH).days
    if name in _WRAPPERS:
        return _WRAPPERS[name], lambda v: v.value
    if name in _JSON_TYPES:
        return pa.string(), lambda v: json_format.MessageToJson(v, indent=None)
    if name in path:
        raise UnsupportedProtobuf(f"message {name} contains itself ({' > '.join((*path, name))}); a recursive "
                                  "type has no table column type")
    fields, getters = _members(descriptor, (*path, name))

    def to_dict(v: Any) -> dict[str, Any]:
        return {n: g(v) for n, g in getters}

    return pa.struct(fields), to_dict


def _oneof_getter(oneof: str, members: list[tuple[str, Get]]) -> Get:
    getters = dict(members)

    def get(m: Any) -> dict[str, Any] | None:
        which = m.WhichOneof(oneof)
        if which is None:
            return None
        return {name: (getters[name](m) if name == which else None) for name in getters}

    return get


def _is_map(f: FieldDescriptor) -> bool:
    return f.type == FieldDescriptor.TYPE_MESSAGE and f.message_type.GetOptions().map_entry
