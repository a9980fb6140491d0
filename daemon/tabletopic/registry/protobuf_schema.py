"""Protobuf schemas as the registry holds them: one file's descriptor, with the files it imports.

A schema is registered either as ``.proto`` text (Java clients, curl) or as a base64
``FileDescriptorProto`` (confluent-kafka's Python serializer).  Text is compiled by protoc
(grpcio-tools ships it), the reference implementation, so a schema that protoc refuses
is refused here with protoc's own message.  Either way the result is validated by
building a descriptor pool from it and its references.  Imports of Google's well-known
types (``google/protobuf/*.proto``) need no reference, as with Confluent's registry.
"""

from __future__ import annotations

import base64
import binascii
import importlib.resources
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.message import DecodeError

WELL_KNOWN_PREFIX = "google/protobuf/"
# protoc needs a name for the file it compiles; an import of the schema names it by its
# reference name instead, which is what its descriptor is renamed to when it is imported.
_MAIN_FILE = "schema.proto"
_PROTOC_TIMEOUT_S = 30
# protoc runs in a process of its own (a schema may make it crash or hang), started bare: without the site
# packages' start-up (``-I -S``) and without ``grpc_tools.protoc``'s imports, a compile costs a third of the
# time ``python -m grpc_tools.protoc`` takes. argv: the folder grpc_tools is in, then protoc's arguments.
_RUN_PROTOC = ("import os, sys; sys.path.insert(0, sys.argv[1]); from grpc_tools import _protoc_compiler; "
               "sys.exit(_protoc_compiler.run_main([b'protoc', *map(os.fsencode, sys.argv[2:])]))")


class InvalidProtobuf(ValueError):
    pass


@dataclass(frozen=True)
class ProtobufSchema:
    """One ``.proto`` file, compiled, and the files it imports (by import path), deepest first."""

    file: descriptor_pb2.FileDescriptorProto
    imports: tuple[descriptor_pb2.FileDescriptorProto, ...]

    @cached_property
    def canonical(self) -> str:
        """What makes two registrations the same schema, however they were written: the descriptor
        without its file name, source positions or derived JSON names, serialized deterministically."""
        plain = descriptor_pb2.FileDescriptorProto()
        plain.CopyFrom(self.file)
        plain.ClearField("name")
        plain.ClearField("source_code_info")
        for message in _messages(plain.message_type):
            for f in message.field:
                f.ClearField("json_name")
        return base64.standard_b64encode(plain.SerializeToString(deterministic=True)).decode("ascii")

    def serialized(self) -> str:
        """The file's descriptor in base64, as ``?format=serialized`` answers it."""
        return base64.standard_b64encode(self.file.SerializeToString(deterministic=True)).decode("ascii")

    def pool(self) -> descriptor_pool.DescriptorPool:
        """A pool holding the well-known types, the imports and the file itself."""
        pool = descriptor_pool.DescriptorPool()
        _add_well_known(pool, [*self.imports, self.file])
        for dep in self.imports:
            pool.Add(dep)
        pool.Add(self.file)
        return pool


def parse(text: str, references: list[tuple[str, ProtobufSchema]]) -> ProtobufSchema:
    """Compile ``text`` (``.proto`` source or a base64 descriptor); ``references`` are (import path, schema)."""
    imports: dict[str, descriptor_pb2.FileDescriptorProto] = {}
    for name, schema in references:
        for dep in schema.imports:
            imports.setdefault(dep.name, dep)
        renamed = descriptor_pb2.FileDescriptorProto()
        renamed.CopyFrom(schema.file)
        renamed.name = name
        imports[name] = renamed
    file = _from_base64(text)
    if file is None:
        file = _compile(text, list(imports.values()))
    missing = [d for d in file.dependency if d not in imports and not d.startswith(WELL_KNOWN_PREFIX)]
    if missing:
        raise InvalidProtobuf(f"imports {', '.join(missing)} without a schema reference naming "
                              f"{'it' if len(missing) == 1 else 'them'}")
    needed = _closure(file, imports)
    schema = ProtobufSchema(file, tuple(needed))
    try:
        schema.pool()
    except (TypeError, KeyError, ValueError) as exc:  # the pool's way of saying a type does not resolve
        raise InvalidProtobuf(f"the schema does not build: {exc}") from None
    if not file.message_type:
        raise InvalidProtobuf("the schema defines no message")
    return schema


def messages_in_order(file: descriptor_pb2.FileDescriptorProto) -> list[str]:
    """Full names of the file's top-level messages, in the order the wire format's indexes count them."""
    prefix = f"{file.package}." if file.package else ""
    return [prefix + m.name for m in file.message_type]


def _from_base64(text: str) -> descriptor_pb2.FileDescriptorProto | None:
    stripped = text.strip()
    if not stripped or any(c in stripped for c in " ;{}\n\"'"):
        return None  # .proto source has statements; base64 has none of these
    try:
        raw = base64.b64decode(stripped, validate=True)
    except (binascii.Error, ValueError):
        return None
    file = descriptor_pb2.FileDescriptorProto()
    try:
        file.ParseFromString(raw)
    except DecodeError:
        return None
    return file if file.message_type or file.enum_type else None


def _compile(text: str, imports: list[descriptor_pb2.FileDescriptorProto]) -> descriptor_pb2.FileDescriptorProto:
    tools = importlib.resources.files("grpc_tools")
    with tempfile.TemporaryDirectory(prefix="tabletopic-proto-") as tmp:
        work = Path(tmp)
        (work / _MAIN_FILE).write_text(text)
        args = [sys.executable, "-I", "-S", "-c", _RUN_PROTOC, str(Path(str(tools)).parent),
                f"-I{work}", f"-I{tools / '_proto'}",
                f"--descriptor_set_out={work / 'out.pb'}"]
        if imports:
            (work / "imports.pb").write_bytes(descriptor_pb2.FileDescriptorSet(file=imports).SerializeToString())
            args.append(f"--descriptor_set_in={work / 'imports.pb'}")
        try:
            done = subprocess.run([*args, _MAIN_FILE], cwd=work, capture_output=True, text=True,
                                  timeout=_PROTOC_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise InvalidProtobuf(f"protoc did not finish within {_PROTOC_TIMEOUT_S} s") from None
        if done.returncode != 0:
            said = done.stderr.replace(f"{work}/", "").strip()
            lines = [line.replace(f"{_MAIN_FILE}:", "line ", 1) for line in said.splitlines()]
            raise InvalidProtobuf("; ".join(lines[-5:]) or f"protoc exited with {done.returncode}")
        found = descriptor_pb2.FileDescriptorSet.FromString((work / "out.pb").read_bytes())
    return found.file[-1]


def _closure(file: descriptor_pb2.FileDescriptorProto, imports: dict[str, descriptor_pb2.FileDescriptorProto]
             ) -> list[descriptor_pb2.FileDescriptorProto]:
    """The imported files ``file`` needs, each after the files it needs itself."""
    out: list[descriptor_pb2.FileDescriptorProto] = []
    seen: set[str] = set()

    def visit(f: descriptor_pb2.FileDescriptorProto) -> None:
        for name in f.dependency:
            if name in seen or name not in imports:
                continue
            seen.add(name)
            visit(imports[name])
            out.append(imports[name])

    visit(file)
    return out


def _add_well_known(pool: descriptor_pool.DescriptorPool, files: list[descriptor_pb2.FileDescriptorProto]) -> None:
    default = descriptor_pool.Default()
    wanted = {d for f in files for d in f.dependency if d.startswith(WELL_KNOWN_PREFIX)}
    added: set[str] = set()

    def add(name: str) -> None:
        if name in added:
            return
        added.add(name)
        _import_well_known(name)
        found = default.FindFileByName(name)
        proto = descriptor_pb2.FileDescriptorProto()
        found.CopyToProto(proto)
        for dep in proto.dependency:
            add(dep)
        pool.Add(proto)

    for name in sorted(wanted):
        add(name)


def _import_well_known(name: str) -> None:
    """Load the module of a well-known type into the default pool (they load on import)."""
    module = name.removesuffix(".proto").replace("/", ".") + "_pb2"
    try:
        __import__(module)
    except ImportError:
        raise InvalidProtobuf(f"imports {name}, which is not one of the well-known types this registry has") from None


def _messages(messages: Iterable[Any]) -> list[descriptor_pb2.DescriptorProto]:
    out: list[descriptor_pb2.DescriptorProto] = []
    for m in messages:
        out.append(m)
        out.extend(_messages(m.nested_type))
    return out
