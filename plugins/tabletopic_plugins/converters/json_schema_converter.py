"""Confluent's ``io.confluent.connect.json.JsonSchemaConverter``: Schema Registry wire format, JSON bodies.

Each value is a magic byte 0, a 4-byte big-endian schema id, then the JSON document.
A batch is grouped by schema id; each id's schema (with its references) is fetched
once and mapped to Arrow once (``json_schema_arrow``), and its documents become one
Arrow table, so each schema version reaches the table as its own part and drives
schema evolution, as Avro does.  Documents are not validated against the schema, as
Confluent's converter does not by default; a value that does not fit its column
fails its record alone, through ``errors.tolerance``.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping, Sequence
from typing import Any

from tabletopic.config.input_limits import nesting_limit, setting_name
from tabletopic.convert.converter import ConvertResult, Failure, guarded, tabulate_isolating
from tabletopic.convert.input_guard import too_deep
from tabletopic.registry.json_schema import InvalidJsonSchema, JsonSchema, parse
from tabletopic_plugins.converters.json_schema_arrow import DocumentShape, UnsupportedJsonSchema, document_shape
from tabletopic_plugins.converters.registry_client import FetchedSchema, RegistryClient, SchemaNotFound

_MAGIC = 0
_HEADER = 5
_ID = struct.Struct(">I")
_MAX_DEPTH = 32


class JsonSchemaConverter:
    def __init__(self) -> None:
        self.client: RegistryClient | None = None
        self._shapes: dict[int, DocumentShape | str] = {}  # a str says why the id cannot be used
        self.max_depth = nesting_limit({})
        self._depth_setting = setting_name(False)

    def configure(self, props: Mapping[str, str], is_key: bool) -> None:
        self.client = RegistryClient.from_props(props)
        self.max_depth = nesting_limit(props)
        self._depth_setting = setting_name(is_key)

    def convert(self, topic: str, data: Sequence[bytes]) -> ConvertResult:
        # json.loads checks the encoding itself; the depth is bounded before it recurses.
        return guarded(data, too_deep(data, self.max_depth, skip=_HEADER, setting=self._depth_setting), self._convert)

    def _convert(self, data: Sequence[bytes]) -> ConvertResult:
        groups: dict[int, list[int]] = {}
        result = ConvertResult()
        for i, value in enumerate(data):
            if len(value) < _HEADER + 1 or value[0] != _MAGIC:
                result.failures.append(Failure(i, "not in the Schema Registry wire format (no magic byte 0 and "
                                                  "schema id); was it written with a JSON Schema serializer?"))
                continue
            groups.setdefault(_ID.unpack_from(value, 1)[0], []).append(i)
        for schema_id, indexes in groups.items():
            shape = self._shape(schema_id)
            if isinstance(shape, str):
                result.failures.extend(Failure(i, shape) for i in indexes)
                continue
            rows: list[dict[str, Any]] = []
            kept: list[int] = []
            for i in indexes:
                try:
                    rows.append(shape.row(json.loads(memoryview(data[i])[_HEADER:].tobytes())))
                    kept.append(i)
                except (ValueError, TypeError, RecursionError) as exc:  # JSONDecodeError and binascii.Error too
                    result.failures.append(Failure(i, f"JSON document does not fit schema id {schema_id}: "
                                                      f"{type(exc).__name__}: {exc}"))
            if rows:
                tabulate_isolating(shape.table, rows, kept, f"schema id {schema_id}", result)
        result.failures.sort(key=lambda f: f.index)
        return result

    def _shape(self, schema_id: int) -> DocumentShape | str:
        found = self._shapes.get(schema_id)
        if found is None:
            assert self.client is not None, "configure() first"
            try:
                found = document_shape(self._parse(self.client.by_id(schema_id, "JSON"), 0))
            except SchemaNotFound as exc:
                found = f"schema id {schema_id} is not in the Schema Registry ({exc})"
            except (InvalidJsonSchema, UnsupportedJsonSchema, ValueError) as exc:
                found = f"schema id {schema_id} cannot be used: {exc}"
            self._shapes[schema_id] = found
        return found

    def _parse(self, fetched: FetchedSchema, depth: int) -> JsonSchema:
        if depth > _MAX_DEPTH:
            raise InvalidJsonSchema(f"schema references nest deeper than {_MAX_DEPTH}")
        assert self.client is not None
        references = [(name, self._parse(self.client.by_version(subject, version, "JSON"), depth + 1))
                      for name, subject, version in fetched.references]
        return parse(json.dumps(fetched.schema), references)
