"""The schema types the registry serves, and what each does: parse, compare, and say when two are the same.

Each type lives in its own modules (``avro_*``, ``protobuf_*``, ``json_*``); this is the one
place that knows them all, so the store and the REST API stay the same for every type.
"""

from __future__ import annotations

import json
from typing import Any

from tabletopic.registry import avro_compatibility, json_compatibility, protobuf_compatibility
from tabletopic.registry.avro_schema import AvroSchema, resolve
from tabletopic.registry.json_schema import JsonSchema
from tabletopic.registry.json_schema import parse as parse_json
from tabletopic.registry.protobuf_schema import ProtobufSchema
from tabletopic.registry.protobuf_schema import parse as parse_protobuf

TYPES = ("JSON", "PROTOBUF", "AVRO")  # as /schemas/types lists them
Parsed = AvroSchema | ProtobufSchema | JsonSchema
_CLASSES: dict[str, type] = {"AVRO": AvroSchema, "PROTOBUF": ProtobufSchema, "JSON": JsonSchema}


def parse(schema_type: str, text: str, references: list[tuple[str, Parsed]]) -> Parsed:
    """Parse ``text``; ``references`` are (reference name, parsed schema). Raises ValueError when invalid."""
    for name, target in references:
        if not isinstance(target, _CLASSES[schema_type]):
            raise ValueError(f"the reference {name!r} is not a {schema_type} schema")
    if schema_type == "AVRO":
        known: dict[str, Any] = {}
        for _, target in references:
            known.update(target.names)  # type: ignore[union-attr]  # checked above: every reference is AVRO
        return resolve(json.loads(text), known)
    if schema_type == "PROTOBUF":
        return parse_protobuf(text, references)  # type: ignore[arg-type]  # checked above: all PROTOBUF
    return parse_json(text, references)  # type: ignore[arg-type]  # checked above: all JSON


def canonical(schema_type: str, parsed: Parsed | None, text: str) -> str:
    """The form two registrations share when they are the same schema (whitespace, key order and,
    for Protobuf, .proto text against a serialized descriptor do not make a schema new)."""
    if schema_type == "PROTOBUF" and parsed is not None:
        return parsed.canonical  # type: ignore[union-attr]  # a PROTOBUF schema parses to ProtobufSchema
    try:
        return json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))
    except ValueError:
        return text


def compatibility_problems(schema_type: str, level: str, new: Parsed, previous: list[Parsed]) -> list[str]:
    """Why ``new`` may not follow ``previous`` (oldest first) under ``level``; [] when it may."""
    other = [p for p in previous if not isinstance(p, _CLASSES[schema_type])]
    if other and level != "NONE":
        was = next(name for name, cls in _CLASSES.items() if isinstance(other[-1], cls))
        return [f"the subject's earlier versions are {was} schemas; a {schema_type} schema cannot follow them"]
    if schema_type == "AVRO":
        return avro_compatibility.compatibility_problems(level, new, previous)  # type: ignore[arg-type]  # one type: checked above
    if schema_type == "PROTOBUF":
        return protobuf_compatibility.compatibility_problems(level, new, previous)  # type: ignore[arg-type]  # one type: checked above
    return json_compatibility.compatibility_problems(level, new, previous)  # type: ignore[arg-type]  # one type: checked above
