"""Avro schemas as plain JSON: their named types indexed, and type names resolved.

The registry checks compatibility on this model and the AvroConverter maps it
to Arrow types; both need the same reading of names, namespaces and the named
types that schema references bring in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}
NAMED = {"record", "error", "enum", "fixed"}


class InvalidSchema(ValueError):
    pass


@dataclass
class AvroSchema:
    """A schema with its named types resolved (including those brought in by references)."""

    root: Any
    names: dict[str, Any] = field(default_factory=dict)


def resolve(schema: Any, known: Mapping[str, Any] | None = None) -> AvroSchema:
    """Index the named types of ``schema``; ``known`` holds those defined by referenced schemas.

    Every type name the schema uses must then be a primitive or defined, here or by a reference.
    """
    names: dict[str, Any] = dict(known or {})
    used: list[tuple[str, str | None]] = []
    _walk(schema, None, names, used)
    for name, namespace in used:
        if _lookup(name, namespace, names) is None:
            raise InvalidSchema(f"unknown type {name!r}; define it or add a schema reference")
    return AvroSchema(schema, names)


def fullname(node: Mapping[str, Any], namespace: str | None) -> tuple[str, str | None]:
    name = node.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidSchema(f"a {node.get('type')} needs a name")
    if "." in name:
        return name, name.rpartition(".")[0]
    ns = node.get("namespace", namespace)
    return (f"{ns}.{name}" if ns else name), (ns or None)


def _walk(node: Any, namespace: str | None, names: dict[str, Any], used: list[tuple[str, str | None]]) -> None:
    """Index the named types under ``node`` and note the type names it uses (checked once all are known)."""
    if isinstance(node, str):
        if node not in PRIMITIVES:
            used.append((node, namespace))
        return
    if isinstance(node, list):
        for branch in node:
            _walk(branch, namespace, names, used)
        return
    if not isinstance(node, dict):
        return
    kind = node.get("type")
    if kind in NAMED:
        full, namespace = fullname(node, namespace)
        names[full] = node
        if kind in ("record", "error"):
            if not isinstance(node.get("fields"), list):
                raise InvalidSchema(f"record {full} needs a list of fields")
            for f in node["fields"]:
                if not isinstance(f, dict) or "name" not in f or "type" not in f:
                    raise InvalidSchema(f"record {full}: each field needs a name and a type")
                _walk(f["type"], namespace, names, used)
        elif kind == "enum" and not isinstance(node.get("symbols"), list):
            raise InvalidSchema(f"enum {full} needs symbols")
        elif kind == "fixed" and not isinstance(node.get("size"), int):
            raise InvalidSchema(f"fixed {full} needs an integer size")
    elif kind == "array":
        _walk(node.get("items"), namespace, names, used)
    elif kind == "map":
        _walk(node.get("values"), namespace, names, used)
    elif kind not in PRIMITIVES:
        _walk(kind, namespace, names, used)


def _lookup(name: str, namespace: str | None, names: Mapping[str, Any]) -> Any:
    if name in names:
        return names[name]
    if namespace and f"{namespace}.{name}" in names:
        return names[f"{namespace}.{name}"]
    return None


def deref(node: Any, namespace: str | None, schema: AvroSchema) -> tuple[Any, str | None]:
    """The node a type name stands for, and the namespace inside it."""
    while True:
        if isinstance(node, str) and node not in PRIMITIVES:
            found = _lookup(node, namespace, schema.names)
            if found is None:
                raise InvalidSchema(f"unknown type {node!r}")
            node = found
        elif isinstance(node, dict) and not isinstance(node.get("type"), str):
            node = node["type"]  # {"type": {...}} or {"type": [...]}
        elif isinstance(node, dict) and node["type"] in PRIMITIVES:
            # A logical type stays a dict, for those who map types; kind_of() still names the primitive.
            return (node if "logicalType" in node else node["type"]), namespace
        else:
            break
    if isinstance(node, dict) and node.get("type") in NAMED:
        namespace = fullname(node, namespace)[1]
    return node, namespace


def kind_of(node: Any) -> str:
    if isinstance(node, str):
        return node
    if isinstance(node, list):
        return "union"
    return "record" if node["type"] == "error" else str(node["type"])


def short_name(node: Any) -> str:
    return node.get("name", "?").rpartition(".")[2] if isinstance(node, dict) else str(node)
