"""Protobuf bodies straight from the wire format to Arrow columns, in native code (ptars).

``protobuf_arrow`` parses each body into a message object and then reads its fields in Python,
about 4 µs a message for a dozen fields. ptars reads a batch of bodies into Arrow builders
without message objects, at about the cost of a bare parse. This module shapes what it returns
into the mapping ``protobuf_arrow`` states, so that a table cannot tell which path read a record:
a ``oneof``'s members become the oneof's struct, unsigned and fixed-width integers widen to long,
and every field is nullable.

It is used only where it gives the rows the Python path gives:
- a message type is read here only if every type in it is one both paths map alike. One that
  holds ``Struct``, ``Value`` or ``ListValue`` (JSON text in the mapping), ``Duration`` or
  ``TimeOfDay`` (ptars gives them types of its own) or ``Date`` (a year 0 is null in the mapping)
  stays in Python;
- a batch goes back to the Python path, which fails its bad records one by one, when ptars refuses
  it (a body does not parse), when a value does not fit the mapping (a uint64 past long, a
  Timestamp near or past the int64 microseconds), or when a body sets two members of one oneof or
  one map key twice. The wire format says the last one wins, and columns cannot tell which came
  last.

A batch holding a body longer than ``MAX_BODY_BYTES`` goes to the Python path too (see there why).

Two differences are left, because columns cannot show them and no serializer writes such bodies:
- a body that writes a singular ``Timestamp`` or wrapper field twice (a concatenation of two
  serialized messages) keeps the last one whole here, where the Python path merges the two field
  by field;
- ptars reads some malformed bodies that the runtime refuses, keeping the fields it knows: a
  group (wire types 3 and 4, which proto3 never writes) closed by another field's end tag or
  nested deeper than 100, and a tag whose field number is past 2^29 - 1. Such a body lands as a
  row instead of failing through ``errors.tolerance``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from ptars import HandlerPool, PtarsConfig

from tabletopic_plugins.converters.map_keys import repeats_a_key
from tabletopic_plugins.converters.protobuf_arrow import MAX_TIMESTAMP_SECONDS, is_map, message_columns

# What protobuf_arrow maps: Timestamp to microseconds in UTC, an enum to its name.
_CONFIG = PtarsConfig(timestamp_unit="us", timestamp_tz="UTC", enum_repr="string")
# Types ptars reads its own way (a duration, a time of day, a date) or not at all (JSON-like values).
_PYTHON_ONLY = {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue",
                "google.protobuf.Duration", "google.type.TimeOfDay", "google.type.Date"}
# The wrappers, which both paths read as their one value.
_WRAPPERS = {f"google.protobuf.{name}Value" for name in ("Double", "Float", "Int64", "UInt64", "Int32", "UInt32",
                                                         "Bool", "String", "Bytes")}

# ptars skips an unknown group by recursion, about 80 bytes of stack a level: a body of 1 MB can
# nest enough groups to overflow the thread's 8 MB stack and kill the process. A body this long
# nests 32,768 at most, and goes through ptars; a longer one goes to the Python path.
MAX_BODY_BYTES = 64 * 1024
# Microseconds past which a Timestamp may be one the Python path fails (|seconds| past its bound, any
# int32 nanos) or one ptars saturated: those batches go to the Python path, which decides.
_SURE_MICROS = MAX_TIMESTAMP_SECONDS * 1_000_000 - 2**31 // 1000 - 1
# A column as ptars gives it -> the column as protobuf_arrow gives it (before the final cast).
Shape = Callable[[pa.Array], pa.Array]


class _PythonOnly(Exception):
    """The message type holds a type this path does not read as the Python path does."""


class _Diverges(Exception):
    """A body in the batch says something columns cannot show as the Python path would."""


class WireDecoder:
    """Bodies of one message type -> a table with ``protobuf_arrow``'s schema for it."""

    def __init__(self, handler: Any, columns: Callable[[Callable[[str], pa.Array]], list[pa.Array]],
                 schema: pa.Schema) -> None:
        self._handler = handler
        self._columns = columns
        self._schema = schema

    def table(self, bodies: Sequence[bytes]) -> pa.Table | None:
        """The bodies' rows, or None when the Python path must read them (see the module's docstring)."""
        if max(map(len, bodies), default=0) > MAX_BODY_BYTES:
            return None
        try:
            batch = self._handler.list_to_record_batch(list(bodies))
            columns = self._columns(batch.column)
            # Only where the types differ: a cast per column costs more than ptars's own read of one body.
            return pa.Table.from_arrays([c if c.type == f.type else c.cast(f.type)
                                         for c, f in zip(columns, self._schema, strict=True)], schema=self._schema)
        except (ValueError, TypeError, pa.ArrowException, _Diverges):
            return None
        except BaseException as exc:
            if _is_panic(exc):  # a Rust panic reaches Python as a BaseException; the Python path decides
                return None
            raise


def wire_decoder(descriptor: Descriptor, schema: pa.Schema) -> WireDecoder | None:
    """A decoder for ``descriptor``'s bodies into ``schema`` (``protobuf_arrow``'s), or None if the
    type holds one this path does not read alike."""
    try:
        columns = _message(descriptor)
        handler = HandlerPool([descriptor.file], config=_CONFIG).get_for_message(descriptor)
    except Exception:  # _PythonOnly, or a descriptor ptars cannot take: the Python path reads it
        return None
    except BaseException as exc:
        if _is_panic(exc):
            return None
        raise
    return WireDecoder(handler, columns, schema)


def _message(descriptor: Descriptor) -> Callable[[Callable[[str], pa.Array]], list[pa.Array]]:
    """How a message's ptars columns (looked up by field name) become protobuf_arrow's, in its order."""
    steps: list[Callable[[Callable[[str], pa.Array]], pa.Array]] = []
    for name, f, oneof in message_columns(descriptor):
        if oneof is not None:
            steps.append(_oneof([(m.name, _value(m)) for m in oneof.fields]))
        else:
            shape = _field(f)
            steps.append(functools.partial(_shaped_column, name, shape))
    return lambda column: [step(column) for step in steps]


def _shaped_column(name: str, shape: Shape, column: Callable[[str], pa.Array]) -> pa.Array:
    return shape(column(name))


def _field(f: FieldDescriptor) -> Shape:
    if is_map(f):
        key = _value(f.message_type.fields_by_name["key"])
        value = _value(f.message_type.fields_by_name["value"])

        def shape_map(column: pa.Array) -> pa.Array:
            if repeats_a_key(np.diff(column.offsets.to_numpy()), column.keys):
                raise _Diverges("one map key twice")
            return pa.MapArray.from_arrays(column.offsets, key(column.keys), value(column.items))

        return shape_map
    item = _value(f)
    if f.is_repeated:
        return lambda column: pa.ListArray.from_arrays(column.offsets, item(column.values))
    return item


def _value(f: FieldDescriptor) -> Shape:
    """One value of ``f`` (an item, for a repeated field)."""
    if f.type == FieldDescriptor.TYPE_GROUP:
        raise _PythonOnly(f.full_name)
    if f.type != FieldDescriptor.TYPE_MESSAGE:
        return _same
    name = f.message_type.full_name
    if name in _PYTHON_ONLY:
        raise _PythonOnly(name)
    if name == "google.protobuf.Timestamp":
        return _refuse_far_times
    if name in _WRAPPERS:
        return _same
    columns = _message(f.message_type)
    names = [name for name, _, _ in message_columns(f.message_type)]

    def shape_struct(column: pa.Array) -> pa.Array:
        children = columns(lambda child: column.field(child))
        if not children:
            return column
        return pa.StructArray.from_arrays(children, names=names, mask=column.is_null() if column.null_count else None)

    return shape_struct


def _oneof(members: list[tuple[str, Shape]]) -> Callable[[Callable[[str], pa.Array]], pa.Array]:
    names = [name for name, _ in members]

    def shape_oneof(column: Callable[[str], pa.Array]) -> pa.Array:
        children = [shape(column(name)) for name, shape in members]
        chosen = np.zeros(len(children[0]), dtype=np.int8)
        for child in children:
            chosen += child.is_valid().to_numpy(zero_copy_only=False)
        if (chosen > 1).any():
            raise _Diverges("two members of one oneof")
        unset = chosen == 0
        return pa.StructArray.from_arrays(children, names=names, mask=pa.array(unset) if unset.any() else None)

    return shape_oneof


def _refuse_far_times(column: pa.Array) -> pa.Array:
    if len(column) and column.null_count < len(column):
        low, high = pc.min_max(column.cast(pa.int64())).values()
        if low.as_py() < -_SURE_MICROS or high.as_py() > _SURE_MICROS:
            raise _Diverges("a Timestamp near or past int64 microseconds")
    return column


def _is_panic(exc: BaseException) -> bool:
    return type(exc).__name__ == "PanicException"


def _same(column: pa.Array) -> pa.Array:
    return column
