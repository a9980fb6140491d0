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
    """Index the named types of ``schema``; ``known`` holds those defined by referenced schemas."""
    names: dict[str, Any] = dict(known or {})
    _index(schema, None, names)
    _check_names(schema, None, names)
    return AvroSchema(schema, names)


def fullname(node: Mapping[str, Any], namespace: str | None) -> tuple[str, str | None]:
    name = node.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidSchema(f"a {node.get('type')} needs a name")
    if "." in name:
        return name, name.rpartition(".")[0]
    ns = node.get("namespace", namespace)
    return (f"{ns}.{name}" if ns else name), (ns or None)


def _index(node: Any, namespace: str | None, names: dict[str, Any]) -> None:
    if isinstance(node, list):
        for branch in node:
            _index(branch, namespace, names)
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
                _index(f["type"], namespace, names)
        elif kind == "enum" and not isinstance(node.get("symbols"), list):
            raise InvalidSchema(f"enum {full} needs symbols")
        elif kind == "fixed" and not isinstance(node.get("size"), int):
            raise InvalidSchema(f"fixed {full} needs an integer size")
    elif kind == "array":
        _index(node.get("items"), namespace, names)
    elif kind == "map":
        _index(node.get("values"), namespace, names)
    elif isinstance(kind, (dict, list)):
        _index(kind, namespace, names)


def _check_names(node: Any, namespace: str | None, names: dict[str, Any]) -> None:
    """Every type name used must be a primitive or defined (here or by a reference)."""
    if isinstance(node, str):
        if node not in PRIMITIVES and _lookup(node, namespace, names) is None:
            raise InvalidSchema(f"unknown type {node!r}; define it or add a schema reference")
    elif isinstance(node, list):
        for branch in node:
            _check_names(branch, namespace, names)
    elif isinstance(node, dict):
        kind = node.get("type")
        if kind in NAMED:
            namespace = fullname(node, namespace)[1]
            for f in node.get("fields", []) if kind in ("record", "error") else []:
                _check_names(f["type"], namespace, names)
        elif kind == "array":
            _check_names(node.get("items"), namespace, names)
        elif kind == "map":
            _check_names(node.get("values"), namespace, names)
        elif kind not in PRIMITIVES:
            _check_names(kind, namespace, names)


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
