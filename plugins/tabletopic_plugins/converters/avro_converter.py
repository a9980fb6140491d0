"""Confluent's ``io.confluent.connect.avro.AvroConverter``: Schema Registry wire format, decoded with fastavro.

Each value is a magic byte 0, a 4-byte big-endian schema id, then the Avro
binary body.  A batch is grouped by schema id; each id's schema is fetched
once (references included), compiled once for fastavro and for Arrow, and
its records become one Arrow table, so records written with different
schema versions reach the table as separate parts and drive schema evolution.

Record-level problems (no magic byte, an id the registry does not know, a body
that does not decode) are failures for ``errors.tolerance``; a registry that
cannot be reached stops the connector instead (see ``registry_client``).
"""

from __future__ import annotations

import io
import itertools
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import fastavro
import pyarrow as pa

from tabletopic.convert.converter import ConvertResult, Failure, tabulate_isolating
from tabletopic.registry.avro_schema import InvalidSchema, resolve
from tabletopic_plugins.converters.avro_arrow import RecordShape, raw_schema, record_shape
from tabletopic_plugins.converters.avro_batch_decode import BatchDecoder, batch_decoder
from tabletopic_plugins.converters.registry_client import FetchedSchema, RegistryClient, SchemaNotFound

_MAGIC = 0
_HEADER = 5
_ID = struct.Struct(">I")


@dataclass
class _Compiled:
    parsed: Any  # fastavro's parsed schema, without the logical types Arrow applies
    shape: RecordShape
    batch: BatchDecoder | None  # None: fastavro reads every record


class AvroConverter:
    def __init__(self) -> None:
        self.client: RegistryClient | None = None
        self._compiled: dict[int, _Compiled | str] = {}  # a str says why the id cannot be used

    def configure(self, props: Mapping[str, str], is_key: bool) -> None:
        self.client = RegistryClient.from_props(props)

    def convert(self, topic: str, data: Sequence[bytes]) -> ConvertResult:
        groups: dict[int, list[int]] = {}
        by_header: dict[bytes, list[int]] = {}  # a header seen in the batch: its group, not parsed again
        result = ConvertResult()
        for i, value in enumerate(data):
            members = by_header.get(value[:_HEADER])
            if members is None:
                if len(value) < _HEADER or value[0] != _MAGIC:
                    result.failures.append(Failure(i, "not in the Schema Registry wire format (no magic byte 0 "
                                                      "and schema id); was it written with an Avro serializer?"))
                    continue
                members = by_header[value[:_HEADER]] = groups.setdefault(_ID.unpack_from(value, 1)[0], [])
            members.append(i)
        for schema_id, indexes in groups.items():
            compiled = self._compile(schema_id)
            if isinstance(compiled, str):
                result.failures.extend(Failure(i, compiled) for i in indexes)
                continue
            first = len(result.parts)
            self._decode(compiled, schema_id, data, indexes, result)
            if not compiled.shape.record:  # a primitive schema's value: one column, for transforms a primitive
                for part in result.parts[first:]:
                    part.primitive = True
        result.failures.sort(key=lambda f: f.index)
        return result

    def _decode(self, compiled: _Compiled, schema_id: int, data: Sequence[bytes], indexes: list[int],
                result: ConvertResult) -> None:
        if compiled.batch is not None:
            table = self._batch(compiled, data if len(indexes) == len(data) else [data[i] for i in indexes])
            if table is not None:
                result.parts.extend(ConvertResult.single(table, indexes).parts)
                return
        # One buffer for the whole group: a record's end must be where the next begins, which also
        # catches a body that decodes but is too short or too long.
        bodies = [memoryview(data[i])[_HEADER:] for i in indexes]
        buffer = io.BytesIO(b"".join(bodies))
        read, tell, parsed, fix = fastavro.schemaless_reader, buffer.tell, compiled.parsed, compiled.shape.fix
        rows: list[Any] = []
        kept: list[int] = []
        for i, end in zip(indexes, itertools.accumulate(map(len, bodies)), strict=True):
            try:
                row = read(buffer, parsed, None)
                if tell() != end:
                    size = len(data[i]) - _HEADER
                    raise ValueError(f"the record is {size} bytes but its schema read {tell() - end + size}")
                rows.append(row if fix is None else fix(row))
            except Exception as exc:  # fastavro raises many types for a corrupt body
                result.failures.append(Failure(i, f"Avro body does not decode with schema id {schema_id}: "
                                                  f"{type(exc).__name__}: {exc}"))
                buffer.seek(end)
                continue
            kept.append(i)
        if rows:
            shape = compiled.shape
            tabulate_isolating(lambda items: shape.finish(pa.Table.from_pylist(items, schema=shape.wire)), rows, kept,
                               f"schema id {schema_id}", result)

    @staticmethod
    def _batch(compiled: _Compiled, values: Sequence[bytes]) -> pa.Table | None:
        """The values' bodies decoded a field at a time, or None: fastavro then decodes them a record at a
        time, and the records it cannot decode, or whose values Arrow refuses, fail alone."""
        assert compiled.batch is not None
        wire = compiled.batch.table(values, _HEADER)
        if wire is None:
            return None
        try:
            return compiled.shape.finish(wire)
        except (pa.ArrowException, ValueError, OverflowError, TypeError):
            return None

    def _compile(self, schema_id: int) -> _Compiled | str:
        found = self._compiled.get(schema_id)
        if found is None:
            assert self.client is not None, "configure() first"
            try:
                fetched = self.client.by_id(schema_id)
                named: dict[str, Any] = {}
                known: dict[str, Any] = {}
                self._references(fetched, named, known, depth=0)
                schema = resolve(fetched.schema, known)
                parsed: dict[str, Any] = fastavro.parse_schema(  # type: ignore[assignment]  # a record's schema parses to a dict
                    raw_schema(fetched.schema), named_schemas=named)
                shape = record_shape(schema)
                found = _Compiled(parsed, shape, batch_decoder(parsed, shape.wire)
                                  if shape.record and shape.fix is None else None)
            except SchemaNotFound as exc:
                found = f"schema id {schema_id} is not in the Schema Registry ({exc})"
            except (InvalidSchema, fastavro.schema.SchemaParseException, KeyError, TypeError, ValueError) as exc:
                found = f"schema id {schema_id} cannot be used: {exc}"
            self._compiled[schema_id] = found
        return found

    def _references(self, fetched: FetchedSchema, named: dict[str, Any], known: dict[str, Any], depth: int) -> None:
        """Parse referenced schemas first, deepest first, so their named types are known."""
        if depth > 32:
            raise InvalidSchema("schema references nest deeper than 32")
        assert self.client is not None
        for _name, subject, version in fetched.references:
            target = self.client.by_version(subject, version)
            self._references(target, named, known, depth + 1)
            fastavro.parse_schema(raw_schema(target.schema), named_schemas=named)
            known.update(resolve(target.schema, known).names)

