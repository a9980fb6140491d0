"""Confluent's Protobuf rules, one case that must pass and one that must fail for each (BACKWARD)."""

from __future__ import annotations

import pytest

from tabletopic.registry.protobuf_compatibility import compatibility_problems, differences
from tabletopic.registry.protobuf_schema import InvalidProtobuf, parse

BASE = """syntax = "proto3";
package shop;
message Order {
  int32 id = 1;
  string note = 2;
  Item item = 3;
  map<string, int64> tags = 4;
  oneof pay { string card = 5; int64 cash = 6; }
  Status status = 7;
  repeated string lines = 8;
}
message Item { string sku = 1; }
enum Status { NEW = 0; PAID = 1; }
"""


def _check(before: str, after: str) -> list[str]:
    return compatibility_problems("BACKWARD", parse(after, []), [parse(before, [])])


# (rule, an update that keeps it compatible, an update that breaks it)
CASES = [
    ("field added / field number reused with another kind",
     ("int32 id = 1;", "int32 id = 1; bool gift = 9;"), ("string note = 2;", "Item note = 2;")),
    ("field removed / scalar group changed",
     ("string note = 2;", ""), ("int32 id = 1;", "double id = 1;")),
    ("field renamed / message type renamed",
     ("int32 id = 1;", "int32 order_id = 1;"),
     ("Item item = 3;", "Other item = 3;\n}\nmessage Other { string sku = 1;")),
    ("int32 to int64 (one wire group) / int32 to sint32",
     ("int32 id = 1;", "int64 id = 1;"), ("int32 id = 1;", "sint32 id = 1;")),
    ("string to bytes / string to int64",
     ("string note = 2;", "bytes note = 2;"), ("string note = 2;", "int64 note = 2;")),
    ("a message added / a message removed",
     ("message Item", "message Extra { int32 x = 1; }\nmessage Item"), ("Item item = 3;", "string item = 3;")),
    ("enum constant added / enum field made a message",
     ("PAID = 1;", "PAID = 1; SHIPPED = 2;"), ("Status status = 7;", "Item status = 7;")),
    ("oneof field added / two top-level fields moved into one oneof",
     ("int64 cash = 6;", "int64 cash = 6; bool voucher = 10;"),
     ("int32 id = 1;\n  string note = 2;", "oneof key { int32 id = 1; string note = 2; }")),
    ("oneof member moved to the top level / oneof member removed",
     ("oneof pay { string card = 5; int64 cash = 6; }", "string card = 5; oneof pay { int64 cash = 6; }"),
     ("oneof pay { string card = 5; int64 cash = 6; }", "oneof pay { string card = 5; }")),
    ("map value int32 to int64 / map value made a string",
     ("map<string, int64> tags = 4;", "map<string, int32> tags = 4;"),
     ("map<string, int64> tags = 4;", "map<string, string> tags = 4;")),
    ("a field inside a nested message added / changed",
     ("message Item { string sku = 1; }", "message Item { string sku = 1; int32 qty = 2; }"),
     ("message Item { string sku = 1; }", "message Item { int64 sku = 1; }")),
    ("repeated string to optional string / repeated int32 to optional int32 (numeric label)",
     ("repeated string lines = 8;", "optional string lines = 8;"),
     ("repeated string lines = 8;", "repeated string lines = 8; repeated int32 qty = 11;")),
]


@pytest.mark.parametrize(("rule", "good", "bad"), CASES, ids=[c[0] for c in CASES])
def test_each_rule_has_a_compatible_and_an_incompatible_case(rule: str, good: tuple[str, str],
                                                             bad: tuple[str, str]) -> None:
    assert _check(BASE, BASE.replace(*good)) == [], rule
    if "numeric label" in rule:  # the breaking half needs its own before: qty repeated, then optional
        before = BASE.replace(*bad)
        assert _check(before, before.replace("repeated int32 qty", "optional int32 qty"))
        return
    assert _check(BASE, BASE.replace(*bad)), rule


def test_a_package_change_and_a_required_field_are_incompatible() -> None:
    assert any("PACKAGE_CHANGED" in p for p in _check(BASE, BASE.replace("package shop;", "package store;")))
    proto2 = 'syntax = "proto2";\nmessage M { optional int32 a = 1; }\n'
    required = proto2.replace("optional int32 a = 1;", "optional int32 a = 1; required int32 b = 2;")
    assert any("REQUIRED_FIELD_ADDED" in p for p in _check(proto2, required))


def test_forward_and_full_compare_the_other_way_round() -> None:
    old, new = parse(BASE, []), parse(BASE.replace("int32 id = 1;", "int32 id = 1; bool gift = 9;"), [])
    assert compatibility_problems("FORWARD", new, [old]) == []
    assert compatibility_problems("FULL_TRANSITIVE", new, [old, old]) == []
    breaking = parse(BASE.replace("int32 id = 1;", "double id = 1;"), [])
    assert compatibility_problems("FORWARD", breaking, [old])
    assert compatibility_problems("NONE", breaking, [old]) == []


def test_text_and_a_serialized_descriptor_are_the_same_schema() -> None:
    text = parse(BASE, [])
    again = parse(text.serialized(), [])
    assert again.canonical == text.canonical
    assert differences(text, again) == []


def test_imports_need_a_reference_and_resolve_through_it() -> None:
    money = parse('syntax = "proto3";\npackage common;\nmessage Money { int64 cents = 1; }\n', [])
    user = 'syntax = "proto3";\nimport "common/money.proto";\nmessage Pay { common.Money amount = 1; }\n'
    with pytest.raises(InvalidProtobuf, match=r"common/money\.proto"):
        parse(user, [])
    parsed = parse(user, [("common/money.proto", money)])
    assert parsed.pool().FindMessageTypeByName("Pay").fields[0].message_type.full_name == "common.Money"


def test_protoc_says_what_is_wrong() -> None:
    with pytest.raises(InvalidProtobuf, match='"Foo" is not defined'):
        parse('syntax = "proto3";\nmessage X { Foo f = 1; }\n', [])
