"""Protobuf message types as Arrow types, and a batch of decoded messages as Arrow columns.

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

Messages become columns one field at a time, over the whole batch: one Python list per
field, not one dict per message, and nested messages, repeated fields and maps become
Arrow's nested arrays from their flattened children and offsets.

A recursive message type cannot become an Arrow type; its schema is refused with its name.
"""

from __future__ import annotations

import datetime
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor

TIMESTAMP_UTC = pa.timestamp("us", tz="UTC")
# Past this, seconds * 10^6 plus any int32 nanos / 1000 leaves int64.
MAX_TIMESTAMP_SECONDS = (2**63 - 1) // 1_000_000 - 3
_EPOCH = datetime.date(1970, 1, 1)
# Values of one field (or of one repeated field's items), in message order -> their Arrow array.
Build = Callable[[list[Any]], pa.Array]

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
    """How a batch of messages of one type becomes a table: its Arrow schema, and its columns' builder."""

    schema: pa.Schema
    build: Build  # messages -> a StructArray of the schema's fields

    def table(self, messages: Sequence[Any]) -> pa.Table:
        struct = self.build(list(messages))
        return pa.Table.from_struct_array(struct) if len(struct) else self.schema.empty_table()


def message_shape(descriptor: Descriptor) -> MessageShape:
    kind, build = _message(descriptor, (descriptor.full_name,), top=True)
    return MessageShape(pa.schema(list(kind)), build)


def _message(descriptor: Descriptor, path: tuple[str, ...], top: bool = False) -> tuple[pa.DataType, Build]:
    """A message type as a struct, and how messages (never None: the caller masks absent ones) become it."""
    name = descriptor.full_name
    if not top:
        special = _well_known(name)
        if special is not None:
            return special
        if name in path:
            raise UnsupportedProtobuf(f"message {name} contains itself ({' > '.join((*path, name))}); a recursive "
                                      "type has no table column type")
        path = (*path, name)
    fields: list[pa.Field] = []
    builders: list[Build] = []
    for column, f, oneof in message_columns(descriptor):
        kind, build = _oneof(oneof, path) if oneof is not None else _field(f, path)
        fields.append(pa.field(column, kind, nullable=True))
        builders.append(build)
    struct = pa.struct(fields)

    def build_struct(messages: list[Any]) -> pa.Array:
        children = [b(messages) for b in builders]
        return pa.StructArray.from_arrays(children, fields=fields) if children else \
            pa.array([{}] * len(messages), struct)

    return struct, build_struct


def _field(f: FieldDescriptor, path: tuple[str, ...]) -> tuple[pa.DataType, Build]:
    """A field of a message: messages -> the field's column."""
    get = attrgetter(f.name)
    if is_map(f):
        key_t, key_build = _value(f.message_type.fields_by_name["key"], path)
        value_t, value_build = _value(f.message_type.fields_by_name["value"], path)

        def build_map(messages: list[Any]) -> pa.Array:
            maps = [get(m) for m in messages]
            offsets = _offsets(maps)
            keys = list(itertools.chain.from_iterable(maps))
            values = [m[k] for m in maps for k in m]
            return pa.MapArray.from_arrays(offsets, key_build(keys), value_build(values))

        return pa.map_(key_t, value_t), build_map
    item_t, item_build = _value(f, path)
    if f.is_repeated:
        def build_list(messages: list[Any]) -> pa.Array:
            lists = [get(m) for m in messages]
            return pa.ListArray.from_arrays(_offsets(lists), item_build(list(itertools.chain.from_iterable(lists))))

        return pa.list_(item_t), build_list
    if f.type == FieldDescriptor.TYPE_MESSAGE or f.has_presence:
        name = f.name

        def build_present(messages: list[Any]) -> pa.Array:
            present = np.fromiter((m.HasField(name) for m in messages), dtype=bool, count=len(messages))
            values = item_build([get(m) for m in messages])
            return values if present.all() else _null_where(values, ~present)

        return item_t, build_present
    return item_t, lambda messages: item_build([get(m) for m in messages])


def _value(f: FieldDescriptor, path: tuple[str, ...]) -> tuple[pa.DataType, Build]:
    """The Arrow type of one value of ``f`` (an item, for a repeated field) and how values become an array."""
    if f.type == FieldDescriptor.TYPE_MESSAGE:
        return _message(f.message_type, path)
    if f.type == FieldDescriptor.TYPE_ENUM:
        names = {v.number: v.name for v in f.enum_type.values}
        return pa.string(), lambda values: pa.array([names.get(v, str(v)) for v in values], pa.string())
    kind = _SCALARS.get(f.type)
    if kind is None:
        raise UnsupportedProtobuf(f"field {f.full_name} has a type ({f.type}) that has no column type")
    return kind, lambda values: pa.array(values, kind)


def _oneof(oneof: Any, path: tuple[str, ...]) -> tuple[pa.DataType, Build]:
    members = [(m.name, *_value(m, path)) for m in oneof.fields]
    struct = pa.struct([pa.field(name, kind, nullable=True) for name, kind, _ in members])
    oneof_name = oneof.name

    def build(messages: list[Any]) -> pa.Array:
        which = np.array([m.WhichOneof(oneof_name) or "" for m in messages], dtype=object)
        children = []
        for name, _, value_build in members:
            chosen = which == name
            values = value_build([getattr(m, name) for m in messages])
            children.append(values if chosen.all() else _null_where(values, ~chosen))
        unset = which == ""
        return pa.StructArray.from_arrays(children, fields=list(struct), mask=pa.array(unset) if unset.any() else None)

    return struct, build


def _well_known(name: str) -> tuple[pa.DataType, Build] | None:
    if name == "google.protobuf.Timestamp":
        def timestamps(values: list[Any]) -> pa.Array:
            seconds = np.fromiter((v.seconds for v in values), dtype=np.int64, count=len(values))
            nanos = np.fromiter((v.nanos for v in values), dtype=np.int64, count=len(values))
            if (np.abs(seconds) > MAX_TIMESTAMP_SECONDS).any():
                raise OverflowError(f"a Timestamp more than {MAX_TIMESTAMP_SECONDS} seconds from 1970 has no "
                                    "microsecond timestamp")
            # Truncated toward zero, as Java's division truncates a nanos field out of its range.
            return pa.array(seconds * 1_000_000 + np.sign(nanos) * (np.abs(nanos) // 1000), TIMESTAMP_UTC)
        return TIMESTAMP_UTC, timestamps
    if name == "google.type.Date":
        return pa.date32(), lambda values: pa.array(
            [(datetime.date(v.year, v.month, v.day) - _EPOCH).days if v.year else None for v in values], pa.date32())
    if name in _WRAPPERS:
        kind = _WRAPPERS[name]
        return kind, lambda values: pa.array([v.value for v in values], kind)
    if name in _JSON_TYPES:
        return pa.string(), lambda values: pa.array([json_format.MessageToJson(v, indent=None) for v in values],
                                                    pa.string())
    return None


def _offsets(lists: list[Any]) -> pa.Array:
    lengths = np.fromiter((len(x) for x in lists), dtype=np.int32, count=len(lists))
    return pa.array(np.concatenate(([0], np.cumsum(lengths, dtype=np.int32))), pa.int32())


def _null_where(values: pa.Array, missing: np.ndarray) -> pa.Array:
    """``values`` with the positions in ``missing`` null (absent messages, unset oneof members)."""
    if isinstance(values, pa.StructArray):
        # A struct's own validity, so that its children keep their values for the present rows.
        children = [values.field(i) for i in range(values.type.num_fields)]
        valid = pc.and_(pc.invert(pa.array(missing)), values.is_valid())
        return pa.StructArray.from_arrays(children, fields=list(values.type), mask=pc.invert(valid))
    return pc.if_else(pa.array(missing), pa.nulls(len(values), values.type), values)


def message_columns(descriptor: Descriptor) -> list[tuple[str, Any, Any]]:
    """A message's columns in order, each (name, field, None) or, for a oneof, (its name, None, oneof)
    where its first member is."""
    columns: list[tuple[str, Any, Any]] = []
    oneofs_done: set[str] = set()
    for f in descriptor.fields:
        oneof = f.containing_oneof
        if oneof is None or _is_synthetic(oneof):
            columns.append((f.name, f, None))
        elif oneof.name not in oneofs_done:
            oneofs_done.add(oneof.name)
            columns.append((oneof.name, None, oneof))
    return columns


def _is_synthetic(oneof: Any) -> bool:
    """A proto3 ``optional`` is a oneof of one field that the compiler made; it is not a oneof to the user."""
    return len(oneof.fields) == 1 and oneof.fields[0].has_presence and oneof.name == f"_{oneof.fields[0].name}"


def is_map(f: FieldDescriptor) -> bool:
    return f.type == FieldDescriptor.TYPE_MESSAGE and f.message_type.GetOptions().map_entry
