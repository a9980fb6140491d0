"""What a JSON Schema node says about the documents it accepts: its types, its combination (oneOf, anyOf,
allOf) and its content model; what the compatibility diff compares."""

from __future__ import annotations

from typing import Any

_TYPES = ("null", "boolean", "object", "array", "number", "integer", "string")
_JSON_TYPES: dict[type, str] = {str: "string", list: "array", dict: "object"}


def combined_of(node: dict[str, Any]) -> tuple[str, list[Any]] | None:
    for key in ("oneOf", "anyOf", "allOf"):
        if isinstance(node.get(key), list):
            return key, node[key]
    return None


def types_of(node: dict[str, Any]) -> set[str]:
    kind = node.get("type")
    if isinstance(kind, str):
        return {kind}
    if isinstance(kind, list):
        return set(kind)
    if "enum" in node or "const" in node:
        values = node.get("enum", [node.get("const")])
        return {json_type(v) for v in values}
    if any(k in node for k in ("properties", "additionalProperties", "required", "patternProperties")):
        return {"object"}
    if "items" in node:
        return {"array"}
    return set(_TYPES)


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return _JSON_TYPES.get(type(value), "string")


def content_model(node: dict[str, Any]) -> tuple[str, Any]:
    """'open', 'closed' or 'partial' (with the schema that covers properties not listed)."""
    extra = node.get("additionalProperties", True)
    if extra is False:
        return "closed", None
    if extra is True or extra == {}:
        return ("partial", {}) if node.get("patternProperties") else ("open", None)
    return "partial", extra
