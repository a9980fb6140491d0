"""Bodies read in native code give the rows the Python path gives, or are handed back to it."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from google.protobuf import message_factory
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tabletopic.registry.protobuf_schema import parse
from tabletopic_plugins.converters.protobuf_arrow import message_shape
from tabletopic_plugins.converters.protobuf_wire_decode import WireDecoder, wire_decoder
from tests.unit.fuzzing import examples

PROTO = """syntax = "proto3";
package w;
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";
message M {
  int32 i32 = 1; sint32 s32 = 2; sfixed32 sf32 = 3; uint32 u32 = 4; fixed32 f32 = 5;
  int64 i64 = 6; sint64 s64 = 7; sfixed64 sf64 = 8; uint64 u64 = 9; fixed64 f64 = 10;
  float fl = 11; double db = 12; bool b = 13; string s = 14; bytes by = 15;
  Color color = 16;
  optional string maybe = 17;
  optional int64 maybe_n = 18;
  Inner inner = 19;
  repeated Inner items = 20;
  repeated int64 numbers = 21;
  repeated Color colors = 22;
  repeated string words = 23;
  map<string, Inner> by_name = 24;
  map<int32, string> by_number = 25;
  oneof choice { string text = 26; Inner nested = 27; int64 count = 28; }
  google.protobuf.Timestamp at = 29;
  google.protobuf.Int64Value w_i64 = 30;
  google.protobuf.UInt64Value w_u64 = 31;
  google.protobuf.UInt32Value w_u32 = 32;
  google.protobuf.StringValue w_s = 33;
  google.protobuf.BoolValue w_b = 34;
  google.protobuf.DoubleValue w_d = 35;
  google.protobuf.BytesValue w_by = 36;
  repeated google.protobuf.Timestamp times = 37;
}
message Inner {
  string name = 1;
  repeated string tags = 2;
  oneof pick { int32 x = 3; string y = 4; }
  map<string, int64> counts = 5;
}
enum Color { RED = 0; GREEN = 1; BLUE = 2; }
"""

_INT32 = st.integers(-2**31, 2**31 - 1)
_UINT32 = st.integers(0, 2**32 - 1)
_INT64 = st.integers(-2**63, 2**63 - 1)
_UINT64 = st.integers(0, 2**64 - 1)
_TEXT = st.text(max_size=6)
_ENUM = st.integers(-3, 5)  # 3 to 5 and negatives: numbers an older schema does not know
# Seconds within years 1-9999, Timestamp's own range, or far past any microsecond timestamp; nanos
# mostly within their range, sometimes any int32 (negative ones truncate toward zero).
_SECONDS = st.one_of(st.integers(-62_135_596_800, 253_402_300_799), st.sampled_from([-2**62, 2**62]))
_NANOS = st.one_of(st.integers(0, 999_999_999), st.integers(-2**31, 2**31 - 1))


def _cls(proto: str, name: str) -> Any:
    return message_factory.GetMessageClass(parse(proto, []).pool().FindMessageTypeByName(name))


M = _cls(PROTO, "w.M")
SHAPE = message_shape(M.DESCRIPTOR)
WIRE = wire_decoder(M.DESCRIPTOR, SHAPE.schema)


@st.composite
def _inner(draw: Any, target: Any) -> None:
    if draw(st.booleans()):
        target.name = draw(_TEXT)
    target.tags.extend(draw(st.lists(_TEXT, max_size=3)))
    pick = draw(st.sampled_from(["", "x", "y"]))
    if pick == "x":
        target.x = draw(_INT32)
    elif pick == "y":
        target.y = draw(_TEXT)
    for key, value in draw(st.dictionaries(_TEXT, _INT64, max_size=3)).items():
        target.counts[key] = value


@st.composite
def _message(draw: Any, big_unsigned: bool = True) -> bytes:
    m = M()
    u64 = _UINT64 if big_unsigned else st.integers(0, 2**63 - 1)
    for name, values in (("i32", _INT32), ("s32", _INT32), ("sf32", _INT32), ("u32", _UINT32), ("f32", _UINT32),
                         ("i64", _INT64), ("s64", _INT64), ("sf64", _INT64), ("u64", u64), ("f64", u64),
                         ("fl", st.floats(width=32, allow_nan=False)), ("db", st.floats(allow_nan=False)),
                         ("b", st.booleans()), ("s", _TEXT), ("by", st.binary(max_size=4)), ("color", _ENUM)):
        if draw(st.booleans()):
            setattr(m, name, draw(values))
    if draw(st.booleans()):
        m.maybe = draw(_TEXT)
    if draw(st.booleans()):
        m.maybe_n = draw(_INT64)
    if draw(st.booleans()):
        draw(_inner(m.inner))
    for _ in range(draw(st.integers(0, 2))):
        draw(_inner(m.items.add()))
    m.numbers.extend(draw(st.lists(_INT64, max_size=3)))
    m.colors.extend(draw(st.lists(_ENUM, max_size=3)))
    m.words.extend(draw(st.lists(_TEXT, max_size=3)))
    for key in draw(st.lists(_TEXT, max_size=2, unique=True)):
        draw(_inner(m.by_name[key]))
    for key, value in draw(st.dictionaries(_INT32, _TEXT, max_size=3)).items():
        m.by_number[key] = value
    choice = draw(st.sampled_from(["", "text", "nested", "count"]))
    if choice == "text":
        m.text = draw(_TEXT)
    elif choice == "nested":
        draw(_inner(m.nested))
    elif choice == "count":
        m.count = draw(_INT64)
    if draw(st.booleans()):
        m.at.seconds, m.at.nanos = draw(_SECONDS), draw(_NANOS)
    for name, values in (("w_i64", _INT64), ("w_u64", u64), ("w_u32", _UINT32), ("w_s", _TEXT),
                         ("w_b", st.booleans()), ("w_d", st.floats(allow_nan=False)), ("w_by", st.binary(max_size=3))):
        if draw(st.booleans()):
            getattr(m, name).value = draw(values)
    for _ in range(draw(st.integers(0, 2))):
        m.times.add(seconds=draw(_SECONDS), nanos=draw(_NANOS))
    return m.SerializeToString()


def _python_rows(bodies: list[bytes]) -> pa.Table | None:
    """What the Python path makes of the bodies: their table, or None if Arrow refuses a value."""
    try:
        return SHAPE.table([M.FromString(b) for b in bodies])
    except (pa.ArrowException, OverflowError, ValueError):
        return None


def test_every_type_here_is_read_natively() -> None:
    assert isinstance(WIRE, WireDecoder)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_message(), min_size=1, max_size=8))
def test_serialized_messages_give_the_python_paths_rows(bodies: list[bytes]) -> None:
    assert WIRE is not None
    native = WIRE.table(bodies)
    python = _python_rows(bodies)
    if python is None:  # a uint64 past long, a Timestamp past microseconds: the Python path fails the record alone
        assert native is None
        return
    assert native is not None, "a batch the Python path reads whole was handed back"
    assert native.schema == python.schema
    assert _rows(native) == _rows(python)


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(_message(big_unsigned=False), min_size=1, max_size=4), st.data())
def test_a_body_the_runtime_refuses_sends_the_batch_to_the_python_path(bodies: list[bytes], data: Any) -> None:
    assert WIRE is not None
    target = data.draw(st.integers(0, len(bodies) - 1))
    body = bytearray(bodies[target])
    for _ in range(data.draw(st.integers(1, 3))):
        if body:
            body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
    bodies[target] = bytes(body) + data.draw(st.binary(max_size=3))
    native = WIRE.table(bodies)
    if native is None:
        return
    # Whatever the native path reads must be what the runtime reads, body by body.
    try:
        parsed = [M.FromString(b) for b in bodies]
    except DecodeError:
        # ptars's leniencies (see the module): groups, which proto3 never writes, and huge field numbers.
        assert _has_group_or_huge_tag(bodies[target])
        return
    python = _python_rows(bodies)
    assert python is not None
    assert _rows(native) == _rows(SHAPE.table(parsed))


@pytest.mark.parametrize("body, why", [
    (M(text="t").SerializeToString() + M(count=3).SerializeToString(), "two members of one oneof"),
    (b"\xc2\x01\x05\n\x01a\x12\x00" * 2, "one map key twice"),  # by_name {"a": Inner()} written twice
])
def test_what_columns_cannot_show_goes_to_the_python_path(body: bytes, why: str) -> None:
    assert WIRE is not None
    assert WIRE.table([body]) is None, why
    assert SHAPE.table([M.FromString(body)]).num_rows == 1


def test_types_the_paths_map_differently_stay_in_python() -> None:
    proto = ('syntax = "proto3";\nimport "google/protobuf/struct.proto";\nimport "google/protobuf/duration.proto";\n'
             "message A { google.protobuf.Struct doc = 1; }\nmessage B { repeated google.protobuf.Duration d = 1; }\n")
    for name in ("A", "B"):
        descriptor = _cls(proto, name).DESCRIPTOR
        assert wire_decoder(descriptor, message_shape(descriptor).schema) is None


def test_a_long_body_goes_to_the_python_path_before_ptars_can_overflow_the_stack() -> None:
    assert WIRE is not None
    deep = b"\x0b" * 500_000 + b"\x0c" * 500_000  # groups of field 1 nested 500,000 deep: 1 MB
    assert WIRE.table([deep]) is None
    with pytest.raises(DecodeError):
        M.FromString(deep)  # so the Python path fails it alone


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.binary(max_size=40), min_size=1, max_size=4))
def test_any_bytes_give_rows_or_go_back_without_harm(bodies: list[bytes]) -> None:
    assert WIRE is not None
    native = WIRE.table(bodies)
    assert native is None or native.num_rows == len(bodies)


def _rows(table: pa.Table) -> Any:
    """The table's rows to compare: timestamps as their integers (a corrupt body can hold one past
    Python's datetime), each map's entries in one order."""
    schema = pa.schema([f.with_type(_integer_times(f.type)) for f in table.schema])
    return _unordered_maps(table.cast(schema).to_pylist())


def _integer_times(kind: pa.DataType) -> pa.DataType:
    if pa.types.is_timestamp(kind):
        return pa.int64()
    if pa.types.is_struct(kind):
        return pa.struct([f.with_type(_integer_times(f.type)) for f in kind])
    if pa.types.is_map(kind):
        return pa.map_(_integer_times(kind.key_type), kind.item_field.with_type(_integer_times(kind.item_type)))
    if pa.types.is_list(kind):
        return pa.list_(kind.value_field.with_type(_integer_times(kind.value_type)))
    return kind


def _unordered_maps(value: Any) -> Any:
    """Rows with each map's entries in one order: the runtime keeps a map's entries in its own order,
    the native path in the body's, and a map has no order."""
    if isinstance(value, dict):
        return {k: _unordered_maps(v) for k, v in value.items()}
    if isinstance(value, list):
        items = [_unordered_maps(v) for v in value]
        return sorted(items, key=repr) if items and isinstance(value[0], tuple) else items
    if isinstance(value, tuple):
        return tuple(_unordered_maps(v) for v in value)
    return value


def _has_group_or_huge_tag(body: bytes) -> bool:
    """Whether a walk of the body's tags (into what parses as nested messages) meets wire type 3 or 4,
    or a field number past 2^29 - 1."""
    pos = 0
    try:
        while pos < len(body):
            tag, pos = _varint(body, pos)
            wire_type = tag & 7
            if wire_type in (3, 4) or tag >> 3 >= 2**29:
                return True
            if wire_type == 0:
                _, pos = _varint(body, pos)
            elif wire_type == 1:
                pos += 8
            elif wire_type == 5:
                pos += 4
            elif wire_type == 2:
                size, pos = _varint(body, pos)
                if _has_group_or_huge_tag(body[pos:pos + size]):
                    return True
                pos += size
            else:
                return False
    except IndexError:
        return False
    return False


def _varint(body: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        byte = body[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
