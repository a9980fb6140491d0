"""Confluent's ``io.confluent.connect.protobuf.ProtobufConverter``: Schema Registry wire format, Protobuf bodies.

Each value is a magic byte 0, a 4-byte big-endian schema id, the message indexes
(which message of the schema's file: a zig-zag varint count, then one varint per
level; a single 0 byte stands for ``[0]``, the first message), then the Protobuf
body.  A batch is grouped by (schema id, message); each group's message class is
built once from the registry's descriptor, its bodies are parsed by the protobuf
runtime, and its rows become one Arrow table, so each schema version reaches the
table as its own part and drives schema evolution, as Avro does. A group's bodies are
read straight into Arrow in native code where that gives the same rows
(``protobuf_wire_decode``); the runtime's parse is the path for the rest, and for a group
with a body that does not parse, so that the bad record fails alone.

With ``use.latest.version=true`` (AutoMQ's ``by_latest_schema``), a value without the
header is a bare Protobuf body (one never starts with a 0 byte: field number 0 does not
exist), decoded with the latest schema of the subject ``<topic>-value`` (``-key`` for keys)
and its first message, or the one ``message.name`` names; the latest version is asked for
again once ``latest.cache.ms`` (30 s) has passed.

A record that does not parse, names an unknown id or message, or holds a value
Arrow refuses fails alone, through ``errors.tolerance``; a registry that cannot be
reached stops the connector instead (see ``registry_client``).
"""

from __future__ import annotations

import struct
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from google.protobuf import message_factory
from google.protobuf.message import DecodeError

from tabletopic.convert.converter import ConvertResult, Failure, tabulate_isolating
from tabletopic.registry.protobuf_schema import InvalidProtobuf, ProtobufSchema, messages_in_order, parse
from tabletopic_plugins.converters.protobuf_arrow import MessageShape, UnsupportedProtobuf, message_shape
from tabletopic_plugins.converters.protobuf_wire_decode import WireDecoder, wire_decoder
from tabletopic_plugins.converters.registry_client import FetchedSchema, RegistryClient, SchemaNotFound

_MAGIC = 0
_ID = struct.Struct(">I")
_MAX_DEPTH = 32
_SHORT_HEADER = 6


@dataclass
class _Compiled:
    message: Any  # the generated message class
    shape: MessageShape
    wire: WireDecoder | None  # None: the type is read in Python only


class ProtobufConverter:
    def __init__(self) -> None:
        self.client: RegistryClient | None = None
        self._schemas: dict[int, ProtobufSchema | str] = {}  # a str says why the id cannot be used
        self._compiled: dict[tuple[int, tuple[int, ...]], _Compiled | str] = {}
        self._use_latest = False
        self._suffix = "-value"
        self._message_name: str | None = None
        self._latest_ttl_s = 30.0
        self._latest: dict[str, tuple[float, tuple[int, tuple[int, ...]] | str]] = {}  # topic -> (when, found)

    def configure(self, props: Mapping[str, str], is_key: bool) -> None:
        self.client = RegistryClient.from_props(props)
        self._use_latest = props.get("use.latest.version", "false").strip().lower() == "true"
        self._suffix = "-key" if is_key else "-value"
        self._message_name = props.get("message.name") or None
        self._latest_ttl_s = int(props.get("latest.cache.ms", "30000")) / 1000

    def convert(self, topic: str, data: Sequence[bytes]) -> ConvertResult:
        groups: dict[tuple[int, tuple[int, ...]], list[tuple[int, int]]] = {}  # -> (index, body offset)
        # The usual header, magic byte, id and a 0 for the first message, is six bytes: a header
        # seen once in the batch is looked up by them rather than parsed again.
        short: dict[bytes, list[tuple[int, int]]] = {}
        result = ConvertResult()
        for i, value in enumerate(data):
            members = short.get(value[:_SHORT_HEADER])
            if members is not None:
                members.append((i, _SHORT_HEADER))
                continue
            if self._use_latest and value[:1] != b"\x00":
                latest = self._latest_for(topic)
                if isinstance(latest, str):
                    result.failures.append(Failure(i, latest))
                else:
                    groups.setdefault(latest, []).append((i, 0))
                continue
            header = _header(value)
            if isinstance(header, str):
                result.failures.append(Failure(i, header))
                continue
            schema_id, indexes, offset = header
            members = groups.setdefault((schema_id, indexes), [])
            members.append((i, offset))
            if offset == _SHORT_HEADER:
                short[value[:_SHORT_HEADER]] = members
        for key, members in groups.items():
            compiled = self._compile(*key)
            if isinstance(compiled, str):
                result.failures.extend(Failure(i, compiled) for i, _ in members)
                continue
            self._decode(compiled, key[0], data, members, result)
        result.failures.sort(key=lambda f: f.index)
        return result

    def _latest_for(self, topic: str) -> tuple[int, tuple[int, ...]] | str:
        """(schema id, message indexes) of the subject's latest schema, or why there is none."""
        now = time.monotonic()
        cached = self._latest.get(topic)
        if cached is not None and now - cached[0] < self._latest_ttl_s:
            return cached[1]
        assert self.client is not None, "configure() first"
        subject = topic + self._suffix
        found: tuple[int, tuple[int, ...]] | str
        try:
            fetched = self.client.latest(subject, "PROTOBUF")
            schema = self._schema(fetched.id)
            if isinstance(schema, str):
                found = schema
            else:
                names = messages_in_order(schema.file)
                wanted = self._message_name or names[0]
                found = (fetched.id, (names.index(wanted),)) if wanted in names else \
                    f"message.name {wanted!r} is not a top-level message of {subject}'s latest schema ({names})"
        except SchemaNotFound as exc:
            found = f"no bare Protobuf without a schema id can be read: subject {subject} has no schema ({exc})"
        self._latest[topic] = (now, found)
        return found

    def _decode(self, compiled: _Compiled, schema_id: int, data: Sequence[bytes], members: list[tuple[int, int]],
                result: ConvertResult) -> None:
        if compiled.wire is not None:
            table = compiled.wire.table([data[i][offset:] for i, offset in members])
            if table is not None:
                result.parts.extend(ConvertResult.single(table, [i for i, _ in members]).parts)
                return
        parse_body = compiled.message.FromString
        messages: list[Any] = []
        kept: list[int] = []
        for i, offset in members:
            try:
                messages.append(parse_body(memoryview(data[i])[offset:]))
                kept.append(i)
            except (DecodeError, ValueError, TypeError, RecursionError) as exc:
                result.failures.append(Failure(i, f"Protobuf body does not decode with schema id {schema_id}: "
                                                  f"{type(exc).__name__}: {exc}"))
        if messages:
            tabulate_isolating(compiled.shape.table, messages, kept, f"schema id {schema_id}", result)

    def _compile(self, schema_id: int, indexes: tuple[int, ...]) -> _Compiled | str:
        key = (schema_id, indexes)
        found = self._compiled.get(key)
        if found is None:
            schema = self._schema(schema_id)
            if isinstance(schema, str):
                found = schema
            else:
                try:
                    descriptor = _message_at(schema, indexes)
                    shape = message_shape(descriptor)
                    found = _Compiled(message_factory.GetMessageClass(descriptor), shape,
                                      wire_decoder(descriptor, shape.schema))
                except (UnsupportedProtobuf, IndexError, KeyError, TypeError) as exc:
                    found = f"schema id {schema_id}, message {list(indexes)}: {exc}"
            self._compiled[key] = found
        return found

    def _schema(self, schema_id: int) -> ProtobufSchema | str:
        found = self._schemas.get(schema_id)
        if found is None:
            assert self.client is not None, "configure() first"
            try:
                found = self._parse(self.client.by_id(schema_id, "PROTOBUF"), 0)
            except SchemaNotFound as exc:
                found = f"schema id {schema_id} is not in the Schema Registry ({exc})"
            except (InvalidProtobuf, ValueError) as exc:
                found = f"schema id {schema_id} cannot be used: {exc}"
            self._schemas[schema_id] = found
        return found

    def _parse(self, fetched: FetchedSchema, depth: int) -> ProtobufSchema:
        if depth > _MAX_DEPTH:
            raise InvalidProtobuf(f"schema references nest deeper than {_MAX_DEPTH}")
        assert self.client is not None
        references = [(name, self._parse(self.client.by_version(subject, version, "PROTOBUF"), depth + 1))
                      for name, subject, version in fetched.references]
        return parse(fetched.schema, references)


def _header(value: bytes) -> tuple[int, tuple[int, ...], int] | str:
    """(schema id, message indexes, where the body starts), or why the value is not in the wire format."""
    if len(value) < 6 or value[0] != _MAGIC:
        return ("not in the Schema Registry wire format (no magic byte 0, schema id and message indexes); "
                "was it written with a Protobuf serializer?")
    schema_id = _ID.unpack_from(value, 1)[0]
    try:
        count, pos = _zigzag(value, 5)
        if count == 0:
            return schema_id, (0,), pos
        if not 0 < count <= _MAX_DEPTH:
            return f"message indexes count {count} is not valid"
        indexes = []
        for _ in range(count):
            index, pos = _zigzag(value, pos)
            if index < 0:
                return f"message index {index} is not valid"
            indexes.append(index)
    except IndexError:
        return "the message indexes run past the end of the record"
    return schema_id, tuple(indexes), pos


def _zigzag(data: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
        if shift > 63:
            raise IndexError("varint too long")
    return (result >> 1) ^ -(result & 1), pos


def _message_at(schema: ProtobufSchema, indexes: tuple[int, ...]) -> Any:
    """The message descriptor the indexes name: the n-th top-level message, then its m-th nested one, ..."""
    pool = schema.pool()
    file = pool.FindFileByName(schema.file.name)
    descriptor = file.message_types_by_name[schema.file.message_type[indexes[0]].name]
    for index in indexes[1:]:
        descriptor = descriptor.nested_types[index]
    return descriptor
