"""JSON Schema unions as Arrow: a oneOf/anyOf of several members is a struct with a field per member."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pytest

from tabletopic.registry.json_schema import parse
from tabletopic_plugins.converters.json_schema_arrow import DocumentShape, document_shape


def shape(properties: dict[str, Any]) -> DocumentShape:
    return document_shape(parse(json.dumps({"type": "object", "properties": properties}), []))


PAYMENT = {"oneOf": [
    {"type": "object", "properties": {"card": {"type": "string"}}, "required": ["card"]},
    {"type": "object", "properties": {"iban": {"type": "string"}}, "required": ["iban"]}]}


def test_a_oneof_of_tagged_objects_is_a_struct_with_a_field_per_member_named_by_its_tag() -> None:
    made = shape({"id": {"type": "integer"}, "payment": PAYMENT})
    payment = made.schema.field("payment").type
    assert payment == pa.struct([pa.field("card", pa.string()), pa.field("iban", pa.string())])
    table = made.table([made.row({"id": 1, "payment": {"card": "4111"}}),
                        made.row({"id": 2, "payment": {"iban": "FR76"}}),
                        made.row({"id": 3, "payment": None})])
    assert table.column("payment").to_pylist() == [{"card": "4111", "iban": None}, {"card": None, "iban": "FR76"},
                                                   None]


def test_an_object_member_with_a_title_keeps_its_struct() -> None:
    made = shape({"p": {"oneOf": [{"title": "Card", "type": "object", "properties": {
        "number": {"type": "string"}, "expiry": {"type": "string"}}, "required": ["number"]},
        {"type": "string"}]}})
    p_type = made.schema.field("p").type
    assert [f.name for f in p_type] == ["Card", "string"]
    assert made.row({"p": {"number": "4111"}}) == {"p": {"Card": {"number": "4111"}, "string": None}}
    assert made.row({"p": "cash"}) == {"p": {"Card": None, "string": "cash"}}


def test_members_are_named_by_title_then_by_type_then_by_place() -> None:
    made = shape({"v": {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]},
                  "w": {"oneOf": [{"title": "Cash", "type": "integer"}, {"type": "integer"}]}})
    assert [f.name for f in made.schema.field("v").type] == ["string", "integer"]
    assert [f.name for f in made.schema.field("w").type] == ["Cash", "member1"]
    row = made.row({"v": 7, "w": 3})
    assert row == {"v": {"string": None, "integer": 7}, "w": {"Cash": 3, "member1": None}}
    assert made.table([row]).num_rows == 1


def test_a_member_keeps_its_own_conversions_and_a_value_that_matches_none_fails() -> None:
    made = shape({"at": {"oneOf": [{"type": "string", "format": "date-time"}, {"type": "boolean"}]}})
    row = made.row({"at": "2026-11-26T10:00:00Z"})
    table = made.table([row])
    assert table.column("at").type.field("string").type == pa.timestamp("us", tz="UTC")
    with pytest.raises(ValueError, match="matches none"):
        made.row({"at": 12})


def test_null_and_one_member_stay_a_nullable_column() -> None:
    made = shape({"email": {"oneOf": [{"type": "null"}, {"type": "string"}]}})
    assert made.schema.field("email").type == pa.string()
