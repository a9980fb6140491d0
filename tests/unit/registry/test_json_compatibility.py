"""Confluent's JSON Schema rules (STRICT), one case that must pass and one that must fail for each (BACKWARD)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from tabletopic.registry.json_compatibility import compatibility_problems
from tabletopic.registry.json_schema import InvalidJsonSchema, parse

OPEN = {"type": "object", "properties": {"id": {"type": "integer"}, "name": {"type": "string", "maxLength": 10},
                                         "tags": {"type": "array", "items": {"type": "string"}},
                                         "kind": {"enum": ["a", "b"]}},
        "required": ["id"]}
CLOSED = {**OPEN, "additionalProperties": False}
PARTIAL = {**OPEN, "additionalProperties": {"type": "string"}}


def _check(before: dict[str, Any], change: Callable[[dict[str, Any]], None]) -> list[str]:
    after = copy.deepcopy(before)
    change(after)
    return compatibility_problems("BACKWARD", parse(json.dumps(after), []), [parse(json.dumps(before), [])])


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        *parents, last = path.split("/")
        for p in parents:
            doc = doc[p]
        if value is _DELETE:
            del doc[last]
        else:
            doc[last] = value
    return change


_DELETE = object()


def _replace(doc: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    def change(old: dict[str, Any]) -> None:
        old.clear()
        old.update(copy.deepcopy(doc))
    return change


# (rule, the schema before, a change that keeps it compatible, a change that breaks it)
CASES = [
    ("open model: property removed / typed optional property added",
     OPEN, _set("properties/name", _DELETE), _set("properties/age", {"type": "integer"})),
    ("closed model: optional property added / property removed",
     CLOSED, _set("properties/age", {"type": "integer"}), _set("properties/name", _DELETE)),
    ("partial model: property added that it covers / one it does not",
     PARTIAL, _set("properties/nick", {"type": "string"}), _set("properties/age", {"type": "integer"})),
    ("partial model: property removed that it covers / one it does not",
     PARTIAL, _set("properties/name", _DELETE), _set("properties/id", _DELETE)),
    ("type extended / type narrowed",
     OPEN, _set("properties/id", {"type": ["integer", "null"]}), _set("properties/name", {"type": "null"})),
    ("integer to number / number to integer",
     {**OPEN, "properties": {"n": {"type": "integer"}}}, _set("properties/n", {"type": "number"}),
     _set("properties/n", {"type": "string"})),
    ("maxLength increased / decreased",
     OPEN, _set("properties/name/maxLength", 20), _set("properties/name/maxLength", 5)),
    ("required removed / required added without a default",
     OPEN, _set("required", []), _set("required", ["id", "name"])),
    ("required added with a default / without", {**OPEN, "properties": {**OPEN["properties"],
                                                                    "n": {"type": "integer", "default": 0}}},
     _set("required", ["id", "n"]), _set("required", ["id", "name"])),
    ("enum extended / enum narrowed", OPEN, _set("properties/kind/enum", ["a", "b", "c"]),
     _set("properties/kind/enum", ["a"])),
    ("array items widened / items changed", OPEN, _set("properties/tags/items", {"type": ["string", "integer"]}),
     _set("properties/tags/items", {"type": "integer"})),
    # the breaking half starts from the open model, in the test
    ("closed to open / open to closed", CLOSED, _set("additionalProperties", True), None),
    ("oneOf gains a branch / loses one",
     {"oneOf": [{"type": "null"}, {"type": "integer"}]}, _set("oneOf", [{"type": "null"}, {"type": "integer"},
                                                                       {"type": "string"}]),
     _set("oneOf", [{"type": "null"}])),
    ("a plain type becomes a union holding it / a union without it",
     {"type": "integer"}, _replace({"oneOf": [{"type": "null"}, {"type": "integer"}]}),
     _replace({"oneOf": [{"type": "null"}, {"type": "string"}]})),
]


@pytest.mark.parametrize(("rule", "before", "good", "bad"), CASES, ids=[c[0] for c in CASES])
def test_each_rule_has_a_compatible_and_an_incompatible_case(rule: str, before: dict[str, Any], good: Any,
                                                             bad: Any) -> None:
    if rule.startswith("closed to open"):  # the breaking half: open, then closed
        assert _check(CLOSED, good) == []
        assert _check(OPEN, lambda d: d.update(additionalProperties=False))
        return
    assert _check(before, good) == [], rule
    assert _check(before, bad), rule


def test_forward_reads_the_other_way_round() -> None:
    old, new = parse(json.dumps(CLOSED), []), parse(json.dumps({**CLOSED, "properties": {
        **CLOSED["properties"], "age": {"type": "integer"}}}), [])
    assert compatibility_problems("BACKWARD", new, [old]) == []
    assert compatibility_problems("FORWARD", new, [old])  # the old closed schema refuses the new property


def test_a_reference_to_another_subject_resolves_and_is_compared() -> None:
    address = parse(json.dumps({"type": "object", "properties": {"city": {"type": "string"}}}), [])
    user = {"type": "object", "properties": {"home": {"$ref": "address.json"}}}
    with pytest.raises(InvalidJsonSchema, match=r"address\.json"):
        parse(json.dumps(user), [])
    v1 = parse(json.dumps(user), [("address.json", address)])
    narrower = parse(json.dumps({"type": "object", "properties": {"city": {"type": "integer"}}}), [])
    v2 = parse(json.dumps(user), [("address.json", narrower)])
    assert compatibility_problems("BACKWARD", v2, [v1])
    assert compatibility_problems("BACKWARD", v1, [v1]) == []


def test_an_invalid_document_is_refused_with_the_reason() -> None:
    with pytest.raises(InvalidJsonSchema, match="objekt"):
        parse(json.dumps({"type": "objekt"}), [])
