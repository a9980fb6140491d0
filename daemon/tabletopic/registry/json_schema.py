"""JSON Schemas as the registry holds them: the document, checked against its metaschema, with its references.

A reference's name is the URI a ``$ref`` uses for it (``customer.json`` in
``{"$ref": "customer.json#/$defs/Address"}``), as with Confluent's registry.  The
``jsonschema`` library checks the document and ``referencing`` resolves references,
local (``#/$defs/...``, ``#/definitions/...``) and to other subjects alike.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import jsonschema
import referencing
import referencing.exceptions
from referencing.jsonschema import DRAFT7

if TYPE_CHECKING:
    from referencing._core import Resolver  # referencing exports it from this module only

_ROOT = "urn:tabletopic:schema"


class InvalidJsonSchema(ValueError):
    pass


@dataclass(frozen=True)
class JsonSchema:
    """One JSON Schema document and the documents it references, by reference name."""

    root: Any
    references: tuple[tuple[str, Any], ...]

    @cached_property
    def canonical(self) -> str:
        return json.dumps(self.root, sort_keys=True, separators=(",", ":"))

    @cached_property
    def registry(self) -> referencing.Registry[Any]:
        resources = [(name, _resource(doc)) for name, doc in self.references]
        return referencing.Registry().with_resources([(_ROOT, _resource(self.root)), *resources])

    @property
    def resolver(self) -> Resolver[Any]:
        """Where the root document's ``$ref`` are read from."""
        return self.registry.resolver(_ROOT)

    def resolve(self, node: Any, resolver: Resolver[Any] | None = None
                ) -> tuple[Any, Resolver[Any]]:
        """``node`` with its ``$ref`` followed (repeatedly), and the resolver for the refs inside it."""
        resolver = resolver or self.resolver
        seen = 0
        while isinstance(node, dict) and isinstance(node.get("$ref"), str):
            seen += 1
            if seen > 64:
                raise InvalidJsonSchema(f"$ref {node['$ref']!r} goes round in a cycle")
            try:
                resolved = resolver.lookup(node["$ref"])
            except referencing.exceptions.Unresolvable as exc:
                raise InvalidJsonSchema(f"$ref {node['$ref']!r} does not resolve; a reference to another subject "
                                        "must be listed in the schema's references by that name") from exc
            node, resolver = resolved.contents, resolved.resolver
        return node, resolver


def parse(text: str, references: list[tuple[str, JsonSchema]]) -> JsonSchema:
    try:
        root = json.loads(text)
    except ValueError as exc:
        raise InvalidJsonSchema(f"not JSON: {exc}") from None
    if not isinstance(root, (dict, bool)):
        raise InvalidJsonSchema("a JSON Schema is an object or a boolean")
    try:
        jsonschema.validators.validator_for(root, default=jsonschema.Draft7Validator).check_schema(root)
    except jsonschema.exceptions.SchemaError as exc:
        raise InvalidJsonSchema(f"{exc.message} at {'/'.join(map(str, exc.absolute_path)) or 'the root'}") from None
    docs: dict[str, Any] = {}
    for name, schema in references:
        docs.update(schema.references)
        docs[name] = schema.root
    schema = JsonSchema(root, tuple(docs.items()))
    for ref in _refs(root):
        schema.resolve({"$ref": ref})  # every $ref must resolve now, not when a record needs it
    return schema


def _resource(doc: Any) -> referencing.Resource:
    return referencing.Resource.from_contents(doc, default_specification=DRAFT7)


def _refs(node: Any) -> Iterator[str]:
    """The ``$ref`` values in the root document (its nested ``$id`` scopes are not used by producers' schemas)."""
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            yield node["$ref"]
        for key, value in node.items():
            if key not in ("const", "enum", "default", "examples"):
                yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)
