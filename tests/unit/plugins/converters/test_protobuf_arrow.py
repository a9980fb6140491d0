"""Protobuf messages to Arrow columns: presence, oneofs, nesting, maps, enums and well-known types."""

from __future__ import annotations

import datetime
from typing import Any

import pyarrow as pa
import pytest
from google.protobuf import message_factory

from tabletopic.registry.protobuf_schema import parse
from tabletopic_plugins.converters.protobuf_arrow import TIMESTAMP_UTC, UnsupportedProtobuf, message_shape

PROTO = """syntax = "proto3";
package t;
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";
import "google/protobuf/struct.proto";
message M {
  int64 id = 1;
  optional string maybe = 2;
  Inner inner = 3;
  repeated Inner items = 4;
  map<string, Inner> by_key = 5;
  oneof choice { string text = 6; Inner nested = 7; }
  Color color = 8;
  google.protobuf.Timestamp at = 9;
  google.protobuf.Int64Value wrapped = 10;
  google.protobuf.Struct doc = 11;
  uint32 small = 12;
  repeated int32 numbers = 13;
}
message Inner { string name = 1; repeated string tags = 2; }
enum Color { RED = 0; GREEN = 1; }
"""


def _cls(proto: str, name: str) -> Any:
    return message_factory.GetMessageClass(parse(proto, []).pool().FindMessageTypeByName(name))


def test_every_kind_of_field_lands_in_its_column() -> None:
    cls = _cls(PROTO, "t.M")
    full = cls(id=1, maybe="m", color=1, small=4_000_000_000, numbers=[1, 2])
    full.inner.name = "in"
    full.items.add(name="a", tags=["x"])
    full.items.add(name="b")
    full.by_key["k"].name = "v"
    full.nested.name = "n"
    full.at.FromDatetime(datetime.datetime(2026, 11, 1, 0, 0, 1, 500_000))
    full.wrapped.value = 7
    full.doc.update({"a": [1, "b"]})
    empty = cls()
    text = cls(text="t", color=5)  # 5: a number the enum does not know (an older reader's schema)
    shape = message_shape(cls.DESCRIPTOR)
    table = shape.table([full, empty, text])
    assert table.schema == shape.schema
    assert table.schema.field("at").type == TIMESTAMP_UTC and table.schema.field("small").type == pa.int64()
    rows = table.to_pylist()
    assert rows[0]["maybe"] == "m" and rows[0]["inner"] == {"name": "in", "tags": []}
    assert rows[0]["items"] == [{"name": "a", "tags": ["x"]}, {"name": "b", "tags": []}]
    assert rows[0]["by_key"] == [("k", {"name": "v", "tags": []})]
    assert rows[0]["choice"] == {"text": None, "nested": {"name": "n", "tags": []}}
    assert rows[0]["color"] == "GREEN" and rows[0]["small"] == 4_000_000_000 and rows[0]["numbers"] == [1, 2]
    assert rows[0]["at"] == datetime.datetime(2026, 11, 1, 0, 0, 1, 500_000, tzinfo=datetime.timezone.utc)
    assert rows[0]["wrapped"] == 7 and rows[0]["doc"] == '{"a": [1.0, "b"]}'
    # Unset: presence fields and messages are null, proto3 scalars their defaults.
    assert {k: rows[1][k] for k in ("id", "maybe", "inner", "choice", "color", "at", "wrapped", "doc")} == \
        {"id": 0, "maybe": None, "inner": None, "choice": None, "color": "RED", "at": None, "wrapped": None,
         "doc": None}
    assert rows[1]["items"] == [] and rows[1]["by_key"] == []
    assert rows[2]["choice"] == {"text": "t", "nested": None} and rows[2]["color"] == "5"


def test_a_recursive_message_is_refused_by_name() -> None:
    cls = _cls('syntax = "proto3";\nmessage Node { string v = 1; Node next = 2; }\n', "Node")
    with pytest.raises(UnsupportedProtobuf, match="Node contains itself"):
        message_shape(cls.DESCRIPTOR)


def test_a_timestamp_truncates_its_nanos_toward_zero_and_one_past_microseconds_is_refused() -> None:
    cls = _cls(PROTO, "t.M")
    before, after, far = cls(), cls(), cls()
    before.at.seconds, before.at.nanos = -5, -1500  # out of range nanos: Java's division truncates them
    after.at.seconds, after.at.nanos = 5, 1999
    far.at.seconds = 2**62
    shape = message_shape(cls.DESCRIPTOR)
    micros = shape.table([before, after]).column("at").cast(pa.int64()).to_pylist()
    assert micros == [-5_000_001, 5_000_001]
    with pytest.raises(OverflowError, match="no microsecond timestamp"):
        shape.table([far])
