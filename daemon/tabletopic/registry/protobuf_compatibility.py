"""Protobuf compatibility, with Confluent's rules: a diff of two files' descriptors.

The diff lists every change from ``original`` to ``update`` by kind (Confluent's
difference names) and path.  Some kinds are compatible, and Confluent treats the check
as symmetric: a removed field and an added field are both compatible, because
Protobuf readers skip unknown field numbers and default missing ones.  What breaks is
changing what a field number means: its kind (scalar, message, map), its scalar
group (int32/int64/uint32/uint64/bool are one wire group, sint32/sint64 another, ...),
a message type's name, moving several fields into one oneof, or a required field.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import descriptor_pb2

from tabletopic.registry.compatibility_levels import pairs
from tabletopic.registry.protobuf_schema import ProtobufSchema

FD = descriptor_pb2.FieldDescriptorProto

COMPATIBLE = frozenset({
    "MESSAGE_ADDED", "MESSAGE_MOVED", "ENUM_ADDED", "ENUM_REMOVED", "ENUM_CONST_ADDED", "ENUM_CONST_CHANGED",
    "ENUM_CONST_REMOVED", "FIELD_ADDED", "FIELD_REMOVED", "FIELD_NAME_CHANGED", "FIELD_STRING_OR_BYTES_LABEL_CHANGED",
    "ONEOF_ADDED", "ONEOF_REMOVED", "ONEOF_FIELD_ADDED", "ONEOF_FIELD_MOVED_TO_TOP_LEVEL",
})

_SCALAR_GROUPS = {
    FD.TYPE_INT32: "GENERAL_NUMBER", FD.TYPE_INT64: "GENERAL_NUMBER", FD.TYPE_UINT32: "GENERAL_NUMBER",
    FD.TYPE_UINT64: "GENERAL_NUMBER", FD.TYPE_BOOL: "GENERAL_NUMBER", FD.TYPE_ENUM: "GENERAL_NUMBER",
    FD.TYPE_SINT32: "SIGNED_NUMBER", FD.TYPE_SINT64: "SIGNED_NUMBER",
    FD.TYPE_STRING: "STRING_OR_BYTES", FD.TYPE_BYTES: "STRING_OR_BYTES",
    FD.TYPE_FIXED32: "FIXED32", FD.TYPE_SFIXED32: "FIXED32",
    FD.TYPE_FIXED64: "FIXED64", FD.TYPE_SFIXED64: "FIXED64",
    FD.TYPE_FLOAT: "FLOAT", FD.TYPE_DOUBLE: "DOUBLE",
}


@dataclass(frozen=True)
class Difference:
    kind: str
    path: str

    @property
    def compatible(self) -> bool:
        return self.kind in COMPATIBLE


@dataclass
class _Side:
    """One schema's types by full name (``.pkg.Outer.Inner``), its own and its imports'."""

    schema: ProtobufSchema
    messages: dict[str, descriptor_pb2.DescriptorProto] = field(default_factory=dict)
    enums: dict[str, descriptor_pb2.EnumDescriptorProto] = field(default_factory=dict)
    packages: dict[str, str] = field(default_factory=dict)  # message full name -> its file's package

    @property
    def proto3(self) -> bool:
        # Labels are read with the schema's own file's syntax, also for types it imports.
        return self.schema.file.syntax == "proto3"

    def __post_init__(self) -> None:
        for f in (*self.schema.imports, self.schema.file):
            prefix = f".{f.package}" if f.package else ""
            self._index(prefix, f.package, f.message_type, f.enum_type)

    def _index(self, prefix: str, package: str, messages: Iterable[Any], enums: Iterable[Any]) -> None:
        for e in enums:
            self.enums[f"{prefix}.{e.name}"] = e
        for m in messages:
            name = f"{prefix}.{m.name}"
            self.messages[name] = m
            self.packages[name] = package
            self._index(name, package, m.nested_type, m.enum_type)

    def is_map(self, type_name: str) -> bool:
        found = self.messages.get(type_name)
        return found is not None and found.options.map_entry

    def local_name(self, type_name: str) -> str:
        package = self.packages.get(type_name, "")
        return type_name.removeprefix(f".{package}.") if package else type_name.lstrip(".")


def differences(original: ProtobufSchema, update: ProtobufSchema) -> list[Difference]:
    return list(_Diff(_Side(original), _Side(update)).files())


class _Diff:
    def __init__(self, original: _Side, update: _Side) -> None:
        self.o, self.u = original, update
        self.comparing: set[tuple[str, str]] = set()  # recursive message types: a pair under way is assumed equal

    def files(self) -> Iterator[Difference]:
        of, uf = self.o.schema.file, self.u.schema.file
        if of.package != uf.package:
            yield Difference("PACKAGE_CHANGED", "#/")
        yield from self.types("#/", of.message_type, uf.message_type, of.enum_type, uf.enum_type,
                              f".{of.package}" if of.package else "", f".{uf.package}" if uf.package else "")

    def types(self, path: str, o_messages: Iterable[Any], u_messages: Iterable[Any], o_enums: Iterable[Any],
              u_enums: Iterable[Any], o_prefix: str, u_prefix: str) -> Iterator[Difference]:
        om = {m.name: (i, m) for i, m in enumerate(o_messages)}
        um = {m.name: (i, m) for i, m in enumerate(u_messages)}
        for name in sorted(om.keys() | um.keys()):
            here = f"{path}{name}"
            if name not in um:
                if not om[name][1].options.map_entry:
                    yield Difference("MESSAGE_REMOVED", here)
            elif name not in om:
                if not um[name][1].options.map_entry:
                    yield Difference("MESSAGE_ADDED", here)
            else:
                yield from self.message(here, om[name][1], um[name][1], f"{o_prefix}.{name}", f"{u_prefix}.{name}")
                if om[name][0] != um[name][0]:
                    yield Difference("MESSAGE_MOVED", here)
        oe = {e.name: e for e in o_enums}
        ue = {e.name: e for e in u_enums}
        for name in sorted(oe.keys() | ue.keys()):
            here = f"{path}{name}"
            if name not in ue:
                yield Difference("ENUM_REMOVED", here)
            elif name not in oe:
                yield Difference("ENUM_ADDED", here)
            else:
                yield from self.enum(here, oe[name], ue[name])

    @staticmethod
    def enum(path: str, o: descriptor_pb2.EnumDescriptorProto, u: descriptor_pb2.EnumDescriptorProto
             ) -> Iterator[Difference]:
        ov, uv = {v.number: v.name for v in o.value}, {v.number: v.name for v in u.value}
        for number in sorted(ov.keys() | uv.keys()):
            if number not in uv:
                yield Difference("ENUM_CONST_REMOVED", f"{path}/{number}")
            elif number not in ov:
                yield Difference("ENUM_CONST_ADDED", f"{path}/{number}")
            elif ov[number] != uv[number]:
                yield Difference("ENUM_CONST_CHANGED", f"{path}/{number}")

    def message(self, path: str, o: descriptor_pb2.DescriptorProto, u: descriptor_pb2.DescriptorProto,
                o_name: str, u_name: str) -> Iterator[Difference]:
        o_fields, u_fields = {f.number: f for f in o.field}, {f.number: f for f in u.field}
        o_oneof, u_oneof = _oneof_of(o), _oneof_of(u)
        o_names = {d.name for i, d in enumerate(o.oneof_decl) if not _synthetic(o, i)}
        u_names = {d.name for i, d in enumerate(u.oneof_decl) if not _synthetic(u, i)}
        gone = {name for name in o_names - u_names
                if not any(n in u_fields for n, of in o_oneof.items() if of == name)}
        # Fields that were independent (or in different oneofs) and now share a oneof: old data may set both.
        for name in sorted(u_names):
            origins, moved_in = set(), 0
            for number, of in u_oneof.items():
                if of != name:
                    continue
                if number in o_oneof:
                    origins.add(f"oneof:{o_oneof[number]}")
                elif number in o_fields:
                    origins.add(f"field:{number}")
                    moved_in += 1
            if len(origins) > 1:
                yield Difference("MULTIPLE_FIELDS_MOVED_TO_ONEOF" if moved_in > 1 else "FIELD_MOVED_TO_EXISTING_ONEOF",
                                 f"{path}/{name}")
        for name in sorted(o_names | u_names):
            if name not in u_names:
                yield Difference("ONEOF_REMOVED", f"{path}/{name}")
            elif name not in o_names:
                yield Difference("ONEOF_ADDED", f"{path}/{name}")
        for number in sorted(o_fields.keys() | u_fields.keys()):
            o_field, u_field = o_fields.get(number), u_fields.get(number)
            o_in, u_in = o_oneof.get(number), u_oneof.get(number)
            here = f"{path}/{u_in + '/' if u_in else ''}{number}"
            if u_field is None:
                assert o_field is not None
                if o_in is not None:
                    if o_in not in gone:
                        yield Difference("ONEOF_FIELD_REMOVED", f"{path}/{o_in}/{number}")
                else:
                    yield Difference("REQUIRED_FIELD_REMOVED" if o_field.label == FD.LABEL_REQUIRED
                                     else "FIELD_REMOVED", here)
            elif o_field is None:
                if u_in is not None:
                    yield Difference("ONEOF_FIELD_ADDED", here)
                else:
                    yield Difference("REQUIRED_FIELD_ADDED" if u_field.label == FD.LABEL_REQUIRED
                                     else "FIELD_ADDED", here)
            else:
                if o_in is not None and u_in is None:
                    yield Difference("ONEOF_FIELD_MOVED_TO_TOP_LEVEL", here)
                yield from self.field(here, o_field, u_field)
        yield from self.types(f"{path}/", o.nested_type, u.nested_type, o.enum_type, u.enum_type, o_name, u_name)

    def field(self, path: str, of: descriptor_pb2.FieldDescriptorProto, uf: descriptor_pb2.FieldDescriptorProto
              ) -> Iterator[Difference]:
        if of.name != uf.name:
            yield Difference("FIELD_NAME_CHANGED", path)
        yield from self.types_of(path, _label(of, self.o.proto3), _label(uf, self.u.proto3), _Type(of), _Type(uf))

    def types_of(self, path: str, o_label: str | None, u_label: str | None, ot: _Type, ut: _Type
                 ) -> Iterator[Difference]:
        ok, uk = ot.kind(self.o), ut.kind(self.u)
        if ok != uk:
            yield Difference("FIELD_KIND_CHANGED", path)
        elif ok == "SCALAR":
            og, ug = _SCALAR_GROUPS[ot.type], _SCALAR_GROUPS[ut.type]
            if og != ug:
                yield Difference("FIELD_SCALAR_KIND_CHANGED", path)
            elif o_label is not None and u_label is not None and o_label != u_label:
                yield Difference("FIELD_STRING_OR_BYTES_LABEL_CHANGED" if og == "STRING_OR_BYTES"
                                 else "FIELD_NUMERIC_LABEL_CHANGED", path)
        elif ok == "MAP":
            o_entry, u_entry = self.o.messages[ot.name], self.u.messages[ut.name]
            for i in (0, 1):  # key, value
                yield from self.types_of(path, None, None, _Type(o_entry.field[i]), _Type(u_entry.field[i]))
        elif ok == "MESSAGE":
            yield from self.named(path, ot.name, ut.name)

    def named(self, path: str, o_name: str, u_name: str) -> Iterator[Difference]:
        if self.o.local_name(o_name) != self.u.local_name(u_name):
            yield Difference("FIELD_NAMED_TYPE_CHANGED", path)
            return
        pair = (o_name, u_name)
        if pair in self.comparing or o_name not in self.o.messages or u_name not in self.u.messages:
            return
        self.comparing.add(pair)
        inner = list(self.message(path, self.o.messages[o_name], self.u.messages[u_name], o_name, u_name))
        yield from inner
        if any(not d.compatible for d in inner):
            yield Difference("FIELD_NAMED_TYPE_CHANGED", path)


@dataclass(frozen=True)
class _Type:
    type: int
    name: str  # the full type name for messages and enums

    def __init__(self, f: descriptor_pb2.FieldDescriptorProto) -> None:
        object.__setattr__(self, "type", f.type)
        object.__setattr__(self, "name", f.type_name)

    def kind(self, side: _Side) -> str:
        if self.type in (FD.TYPE_MESSAGE, FD.TYPE_GROUP):
            return "MAP" if side.is_map(self.name) else "MESSAGE"
        return "SCALAR"


def _oneof_of(m: descriptor_pb2.DescriptorProto) -> dict[int, str]:
    """Field number -> its (real) oneof's name; a proto3 ``optional`` is a synthetic oneof, not a oneof."""
    return {f.number: m.oneof_decl[f.oneof_index].name for f in m.field
            if f.HasField("oneof_index") and not f.proto3_optional}


def _synthetic(m: descriptor_pb2.DescriptorProto, index: int) -> bool:
    return any(f.HasField("oneof_index") and f.oneof_index == index and f.proto3_optional for f in m.field)


def _label(f: descriptor_pb2.FieldDescriptorProto, proto3: bool) -> str | None:
    """The label as written: proto3 fields without one (and oneof members) have none."""
    if f.label == FD.LABEL_REPEATED:
        return "repeated"
    if f.label == FD.LABEL_REQUIRED:
        return "required"
    if f.HasField("oneof_index") and not f.proto3_optional:
        return None
    # A proto3 field without a label is a LABEL_OPTIONAL without presence; proto2's optional has presence.
    return "optional" if f.proto3_optional or not proto3 else None


def compatibility_problems(level: str, new: ProtobufSchema, previous: list[ProtobufSchema]) -> list[str]:
    """Why ``new`` may not follow ``previous`` (oldest first, live versions only) under ``level``."""
    problems = [f"{d.kind} at {d.path}" for original, update, _ in pairs(level, new, previous)
                for d in differences(original, update) if not d.compatible]
    return list(dict.fromkeys(problems))
