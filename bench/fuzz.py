"""Fuzz every converter and envelope: no input may kill the process, and every input ends as a row or
as a failure with its reason (which errors.tolerance then stops on, or dead-letters).

    python bench/fuzz.py                       # 1,000,000 inputs across the cases, 2 at a time
    python bench/fuzz.py --inputs 50000 --cases avro,protobuf

Each case is a connector configuration (a converter, and for the envelopes a transform or a
cdc field) with a generator of valid records. Every input is one of:

- valid: a record the case's producer would write;
- structured: a hand-made hostile value (deep nesting, huge numbers, odd Unicode and lone
  surrogates, NaN and Infinity, duplicate keys, wrong types per field, timestamps and decimals
  out of range, truncated registry headers, unknown schema ids);
- mutated: a valid record with bits flipped, cut short, spliced with another, or grown.

Batches go through the connector's real staging (``tabletopic.stage.staging``: convert, transform,
route, change kind) as the sink stages a fetch, against the built-in Schema Registry on a
Tansu broker. Each case runs in a child process, so a crash (SIGSEGV, an abort) is counted
and reported with its seed and batch instead of ending the run. The figures printed are what
docs/failures.md shows.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import math
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fastavro

from tabletopic.config.connector import parse_connector
from tabletopic.config.worker import parse_worker
from tabletopic.convert.records import RawRecords
from tabletopic.stage.staging import Staging, StagingSettings

BATCH = 64
DEFAULT_INPUTS = 1_000_000
JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"

AVRO_SCHEMA = {"type": "record", "name": "Fuzz", "namespace": "bench", "fields": [
    {"name": "id", "type": "long"},
    {"name": "name", "type": ["null", "string"], "default": None},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "attrs", "type": {"type": "map", "values": "long"}},
    {"name": "inner", "type": {"type": "record", "name": "Inner", "fields": [{"name": "x", "type": "double"}]}},
]}
PROTO = """syntax = "proto3";
package bench;
import "google/protobuf/timestamp.proto";
message Fuzz {
  int64 id = 1;
  string name = 2;
  repeated string tags = 3;
  map<string, int64> attrs = 4;
  oneof pay { string card = 5; int64 cash = 6; }
  google.protobuf.Timestamp at = 7;
  Inner inner = 8;
  double x = 9;
  bytes blob = 10;
}
message Inner { int32 a = 1; repeated Leaf leaves = 2; }
message Leaf { string s = 1; }
"""
JSON_SCHEMA = {"type": "object", "properties": {
    "id": {"type": "integer"}, "name": {"type": "string"}, "at": {"type": "string", "format": "date-time"},
    "tags": {"type": "array", "items": {"type": "string"}},
    "inner": {"type": "object", "properties": {"x": {"type": "number"}}}}, "required": ["id"]}
CONNECT_SCHEMA = {"type": "struct", "optional": False, "fields": [
    {"field": "id", "type": "int64", "optional": False},
    {"field": "name", "type": "string", "optional": True},
    {"field": "at", "type": "int64", "optional": True, "name": "org.apache.kafka.connect.data.Timestamp"},
    {"field": "price", "type": "bytes", "optional": True, "name": "org.apache.kafka.connect.data.Decimal",
     "parameters": {"scale": "2"}},
    {"field": "blob", "type": "bytes", "optional": True},
    {"field": "tags", "type": "array", "items": {"type": "string", "optional": True}, "optional": True},
    {"field": "inner", "type": "struct", "optional": True, "fields": [
        {"field": "x", "type": "float64", "optional": True}]}]}


# -- values ----------------------------------------------------------------------------------------
ODD_TEXT = ["", "\u0000", "\ufeff", "é", "日本", "\U0001f600", "\u202e", "a" * 300, "\\", '"', "\n", "\ud800"]
ODD_JSON_STRINGS = [b'"\\ud800"', b'"\\udfff\\ud800"', b'"\xff\xfe"', b'"\xc0\xaf"', b'"\xed\xa0\x80"',
                    b'"\\u0000"', b'"\\uZZZZ"', b'"unterminated', b'"\t"']
HUGE_NUMBERS = [b"1e400", b"-1e400", b"1e-400", b"123456789012345678901234567890", b"-0", b"9223372036854775808",
                b"-9223372036854775809", b"0.1e99999999", b"00", b"1.", b".5", b"+1", b"0x10"]
LITERALS = [b"NaN", b"Infinity", b"-Infinity", b"nan", b"null", b"true", b"undefined"]


def text(rng: random.Random, encodable: bool = False) -> str:
    """A short string, now and then an odd one; ``encodable``: one UTF-8 can hold (no lone surrogate)."""
    if rng.random() < 0.1:
        odd = rng.choice(ODD_TEXT)
        return odd if not encodable or odd != "\ud800" else "\ufffd"
    return f"v{rng.randrange(10**6)}"


def deep(rng: random.Random) -> bytes:
    depth = rng.choice([10, 500, 999, 1000, 1001, 5000, 100_000, rng.randrange(1, 300_000)])
    openers = bytes(rng.choice(b"[{") for _ in range(min(depth, 64))) * (depth // 64 + 1)
    openers = openers[:depth]
    body = b"".join(b"[" if o == ord("[") else b'{"k":' for o in openers)
    closers = b"".join(b"]" if o == ord("[") else b"}" for o in reversed(openers))
    return body + b"1" + closers


def json_object(rng: random.Random, fields: dict[str, bytes]) -> bytes:
    return b"{" + b",".join(json.dumps(k).encode() + b":" + v for k, v in fields.items()) + b"}"


def hostile_json(rng: random.Random, base: dict[str, Any]) -> tuple[str, bytes]:
    """A JSON object shaped like ``base`` with one hostile part, and the name of its kind."""
    fields = {k: json.dumps(v).encode() for k, v in base.items()}
    name = rng.choice(list(fields)) if fields else "x"
    kind = rng.choice(["deep", "huge number", "odd unicode", "literal", "duplicate key", "wrong type",
                       "nulls in a list", "not an object", "truncated", "empty"])
    if kind == "deep":
        fields[name] = deep(rng)
    elif kind == "huge number":
        fields[name] = rng.choice(HUGE_NUMBERS)
    elif kind == "odd unicode":
        fields[name] = rng.choice(ODD_JSON_STRINGS)
    elif kind == "literal":
        fields[name] = rng.choice(LITERALS)
    elif kind == "nulls in a list":  # valid JSON that pyarrow 26's reader turns into malformed arrays
        fields[name] = rng.choice([b"[null,null]", b"[null,null,null]", b'{"x":[null,null]}', b"[1,null,null]"])
    elif kind == "duplicate key":
        return kind, json_object(rng, fields)[:-1] + b"," + json.dumps(name).encode() + b":" + \
            json.dumps(text(rng)).encode() + b"}"
    elif kind == "wrong type":
        fields[name] = rng.choice([b'"text"', b"[1,2]", b'{"a":1}', b"true", b"1.5", b"-7"])
    elif kind == "not an object":
        return kind, rng.choice([b"[1,2,3]", b'"s"', b"42", b"null", b"[]", b"{}"])
    elif kind == "truncated":
        whole = json_object(rng, fields)
        return kind, whole[:rng.randrange(len(whole))]
    else:
        return kind, rng.choice([b"", b" ", b"\n", b"\x00"])
    return kind, json_object(rng, fields)


def mutate(rng: random.Random, value: bytes, other: bytes) -> tuple[str, bytes]:
    kind = rng.choice(["flip", "truncate", "splice", "insert", "repeat"])
    data = bytearray(value)
    if kind == "flip" and data:
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif kind == "truncate":
        del data[rng.randrange(len(data) + 1):]
    elif kind == "splice":
        data = data[:rng.randrange(len(data) + 1)] + other[rng.randrange(len(other) + 1):]
    elif kind == "insert":
        at = rng.randrange(len(data) + 1)
        data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
    elif kind == "repeat" and data:
        start = rng.randrange(len(data))
        data[start:start] = data[start:start + rng.randint(1, 32)] * rng.randint(2, 50)
    return kind, bytes(data)


# -- cases ---------------------------------------------------------------------------------------
@dataclass
class Registered:
    url: str
    avro: int
    protobuf: int
    json_schema: int


@dataclass
class Case:
    name: str
    props: dict[str, str]
    valid: Callable[[random.Random], bytes]
    hostile: Callable[[random.Random], tuple[str, bytes]]


def header(schema_id: int) -> bytes:
    return b"\x00" + struct.pack(">I", schema_id)


Hostile = Callable[[random.Random], tuple[str, bytes]]


def registry_hostile(schema_id: int, body: Callable[[random.Random], bytes]) -> Hostile:
    def make(rng: random.Random) -> tuple[str, bytes]:
        kind = rng.choice(["truncated header", "unknown schema id", "magic byte", "body"])
        if kind == "truncated header":
            return kind, header(schema_id)[:rng.randrange(5)]
        if kind == "unknown schema id":
            return kind, header(rng.choice([0, 999_999, 2**32 - 1, schema_id + 1000])) + body(rng)
        if kind == "magic byte":
            return kind, bytes([rng.randrange(1, 256)]) + header(schema_id)[1:] + body(rng)
        return "hostile body", header(schema_id) + body(rng)
    return make


def avro_body(rng: random.Random, hostile: bool = False) -> bytes:
    at = rng.randrange(-2**40, 2**41)
    price = rng.randrange(-10**9, 10**9)
    if hostile:
        at = rng.choice([2**62, -(2**62), 10**17, 2**63 - 1])
        price = rng.choice([10**30, -(10**30), 10**12])
    record = {"id": rng.randrange(-2**63, 2**63), "name": None if rng.random() < 0.2 else text(rng, True), "at": at,
              "price": price.to_bytes(16, "big", signed=True).lstrip(b"\x00") or b"\x00",
              "tags": [text(rng, True) for _ in range(rng.randrange(4))],
              "attrs": {text(rng, True): rng.randrange(100)},
              "inner": {"x": rng.choice([0.5, math.inf, -math.inf, math.nan, 1e308])}}
    out = io.BytesIO()
    fastavro.schemaless_writer(out, PARSED_AVRO, record)
    return out.getvalue()


PARSED_AVRO = fastavro.parse_schema({**AVRO_SCHEMA, "fields": [
    {**f, "type": "bytes"} if f["name"] == "price" else f for f in AVRO_SCHEMA["fields"]]})


def protobuf_body(rng: random.Random, message_class: Any, hostile: bool = False) -> bytes:
    m = message_class(id=rng.randrange(-2**63, 2**63), name=text(rng, True), tags=[text(rng, True)], x=rng.random())
    m.attrs[text(rng, True)] = rng.randrange(100)
    if rng.random() < 0.5:
        m.card = text(rng, True)
    else:
        m.cash = rng.randrange(100)
    m.at.seconds = rng.randrange(0, 2**33)
    m.inner.a = rng.randrange(100)
    m.inner.leaves.add(s=text(rng, True))
    body = b"\x00" + m.SerializeToString()  # message index [0]
    if not hostile:
        return body
    kind = rng.randrange(4)
    if kind == 0:  # a timestamp past what a table can hold
        m.at.seconds = rng.choice([2**62, -(2**62), 253402300800 * 10])
        return b"\x00" + m.SerializeToString()
    if kind == 1:  # unknown fields nested as groups, far deeper than any message
        depth = rng.choice([101, 1000, 100_000])
        return body + b"\x7b" * depth + b"\x7c" * depth  # field 15, start group / end group
    if kind == 2:  # a string field holding bytes that are not UTF-8
        return body + b"\x12\x02\xff\xfe"
    return b"\x00" + b"\x0a\xff\xff\xff\xff\x0f"  # a length past the end


def cases(registered: Registered, message_class: Any) -> list[Case]:
    def flat(rng: random.Random) -> dict[str, Any]:
        return {"id": rng.randrange(-2**62, 2**62), "name": text(rng, True), "amount": rng.random() * 1000,
                "at": "2026-11-26T10:00:00Z", "tags": [text(rng, True)], "inner": {"x": rng.randrange(10)}}

    def envelope(rng: random.Random, payload: dict[str, Any]) -> bytes:
        return json.dumps({"schema": CONNECT_SCHEMA, "payload": payload}, separators=(",", ":")).encode()

    def connect_payload(rng: random.Random) -> dict[str, Any]:
        return {"id": rng.randrange(-2**62, 2**62), "name": text(rng, True), "at": rng.randrange(0, 2**41),
                "price": base64.b64encode(rng.randrange(10**6).to_bytes(4, "big")).decode(),
                "blob": base64.b64encode(rng.randbytes(4)).decode(), "tags": [text(rng, True)],
                "inner": {"x": rng.random()}}

    def envelope_hostile(rng: random.Random) -> tuple[str, bytes]:
        payload = connect_payload(rng)
        kind = rng.choice(["timestamp out of range", "decimal out of range", "not base64", "hostile payload",
                           "bad schema"])
        if kind == "timestamp out of range":
            payload["at"] = rng.choice([10**17, 2**62, -(2**63)])
        elif kind == "decimal out of range":
            payload["price"] = base64.b64encode(b"\x7f" * 20).decode()
        elif kind == "not base64":
            payload["blob"] = "not base64!!"
        elif kind == "bad schema":
            return kind, json.dumps({"schema": {"type": "struct", "fields": [{"field": "id", "type": "uint128"}]},
                                     "payload": payload}).encode()
        else:
            inner_kind, value = hostile_json(rng, payload)
            return inner_kind, b'{"schema":' + json.dumps(CONNECT_SCHEMA).encode() + b',"payload":' + value + b"}"
        return kind, envelope(rng, payload)

    def debezium(rng: random.Random) -> dict[str, Any]:
        op = rng.choice("crud")
        row = {"id": rng.randrange(1000), "name": text(rng, True)}
        return {"before": row if op in "ud" else None, "after": None if op == "d" else row, "op": op,
                "source": {"db": "shop", "table": "orders"}, "ts_ms": 1_790_000_000_000}

    def cdc(rng: random.Random) -> dict[str, Any]:
        return {"id": rng.randrange(1000), "op": rng.choice("IUD"), "name": text(rng, True)}

    registry = {"value.converter.schema.registry.url": registered.url}
    keyed = {"iceberg.tables.default-id-columns": "id"}
    return [
        Case("json", {"value.converter": JSON_CONVERTER, "value.converter.schemas.enable": "false"},
             lambda rng: json.dumps(flat(rng)).encode(), lambda rng: hostile_json(rng, flat(rng))),
        Case("json-envelope", {"value.converter": JSON_CONVERTER, "value.converter.schemas.enable": "true"},
             lambda rng: envelope(rng, connect_payload(rng)), envelope_hostile),
        Case("avro", {"value.converter": "io.confluent.connect.avro.AvroConverter", **registry},
             lambda rng: header(registered.avro) + avro_body(rng),
             registry_hostile(registered.avro, lambda rng: avro_body(rng, hostile=True))),
        Case("protobuf", {"value.converter": "io.confluent.connect.protobuf.ProtobufConverter", **registry},
             lambda rng: header(registered.protobuf) + protobuf_body(rng, message_class),
             registry_hostile(registered.protobuf, lambda rng: protobuf_body(rng, message_class, hostile=True))),
        Case("json-schema", {"value.converter": "io.confluent.connect.json.JsonSchemaConverter", **registry},
             lambda rng: header(registered.json_schema) + json.dumps(flat(rng)).encode(),
             registry_hostile(registered.json_schema, lambda rng: hostile_json(rng, flat(rng))[1])),
        Case("string", {"value.converter": "org.apache.kafka.connect.storage.StringConverter"},
             lambda rng: text(rng, True).encode("utf-8", "surrogatepass"),
             lambda rng: ("odd bytes", rng.choice([b"\xff\xfe", b"\xc0\xaf", b"\xed\xa0\x80", b"\x00" * 5]))),
        Case("bytearray", {"value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter"},
             lambda rng: rng.randbytes(rng.randrange(64)), lambda rng: ("empty", b"")),
        Case("debezium", {"value.converter": JSON_CONVERTER, "value.converter.schemas.enable": "false",
                          "transforms": "dbz",
                          "transforms.dbz.type": "org.apache.iceberg.connect.transforms.DebeziumTransform",
                          "iceberg.tables.cdc-field": "_cdc.op", **keyed},
             lambda rng: json.dumps(debezium(rng)).encode(), lambda rng: hostile_json(rng, debezium(rng))),
        Case("cdc", {"value.converter": JSON_CONVERTER, "value.converter.schemas.enable": "false",
                     "iceberg.tables.cdc-field": "op", **keyed},
             lambda rng: json.dumps(cdc(rng)).encode(), lambda rng: hostile_json(rng, cdc(rng))),
    ]


def staging_for(case: Case) -> Staging:
    worker = parse_worker({"bootstrap.servers": "127.0.0.1:9", "key.converter":
                           "org.apache.kafka.connect.storage.StringConverter", "value.converter": JSON_CONVERTER})
    props = {"name": f"fuzz-{case.name}", "topics": "fuzz", "iceberg.tables": "fuzz.t", "errors.tolerance": "all",
             # Staging never opens the catalog, but a connector without one is refused.
             "iceberg.catalog.type": "hadoop", "iceberg.catalog.warehouse": "file:///nonexistent",
             **case.props}
    return Staging(StagingSettings.of(parse_connector(props, worker)))


# -- the invariant ---------------------------------------------------------------------------------
@dataclass
class Tally:
    inputs: Counter[str] = field(default_factory=Counter)  # by kind of input
    rows: int = 0
    failures: int = 0
    neither: list[str] = field(default_factory=list)  # what broke the invariant, and how
    seconds: float = 0.0

    def add(self, other: Tally) -> None:
        self.inputs.update(other.inputs)
        self.rows += other.rows
        self.failures += other.failures
        self.neither += other.neither
        self.seconds += other.seconds


def check_batch(staging: Staging, values: list[bytes], kinds: list[str], tally: Tally) -> None:
    """Stage one batch and hold it to the invariant: each input a row (of well-formed Arrow) or a failure,
    never both, and neither only for a tombstone."""
    raw = RawRecords("fuzz", 0, list(range(len(values))), [0] * len(values), [None] * len(values),
                     list(values), [[] for _ in values])
    staged = staging.stage(raw)
    failed = Counter(f.index for f in staged.failures)
    rows: Counter[int] = Counter()
    for changes in staged.changes.values():
        for change in changes:
            rows.update(int(r) for r in change.rows)
            try:
                change.value.validate(full=True)  # a row must be well-formed Arrow, or it is no row
            except Exception as exc:
                tally.neither.append(f"malformed Arrow rows for inputs {sorted(set(change.rows.tolist()))[:5]}: "
                                     f"{exc}")
    tombstones = set(staged.tombstones)
    for i, kind in enumerate(kinds):
        outcome = (rows[i], 1 if failed[i] else 0)
        # A tombstone (a value the converter reads as null) carries nothing to an append table.
        if outcome not in ((1, 0), (0, 1)) and not (outcome == (0, 0) and i in tombstones):
            tally.neither.append(f"{kind}: {outcome[0]} rows, failed={bool(outcome[1])}: {values[i][:120]!r}")
    empty = [f for f in staged.failures if not f.reason.strip()]
    tally.neither += [f"failure without a reason at {f.index}" for f in empty]
    tally.rows += sum(1 for i in range(len(values)) if rows[i])
    tally.failures += len(failed)


def run_case(case: Case, seed: int, inputs: int, progress: Path | None = None) -> Tally:
    rng = random.Random(seed)
    staging = staging_for(case)
    tally = Tally()
    started = time.perf_counter()
    previous = case.valid(rng)
    for batch in range(0, inputs, BATCH):
        if progress is not None:
            progress.write_text(str(batch // BATCH))
        values, kinds = [], []
        for _ in range(min(BATCH, inputs - batch)):
            roll = rng.random()
            valid = case.valid(rng)
            if roll < 0.4:
                kind, value = "valid", valid
            elif roll < 0.7:
                kind, value = case.hostile(rng)
                kind = f"structured: {kind}"
            else:
                kind, value = mutate(rng, valid, previous)
                kind = f"mutated: {kind}"
            previous = valid
            values.append(value)
            kinds.append(kind)
        tally.inputs.update(kinds)
        check_batch(staging, values, kinds, tally)
    tally.seconds = time.perf_counter() - started
    return tally


# -- the registry, and the parent's run --------------------------------------------------------------
def register(url: str, subject: str, schema: str, schema_type: str) -> int:
    body = json.dumps({"schema": schema, "schemaType": schema_type}).encode()
    request = urllib.request.Request(f"{url}/subjects/{subject}/versions", data=body, method="POST",
                                     headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return int(json.loads(response.read())["id"])


def register_all(url: str) -> Registered:
    return Registered(url, register(url, "fuzz-avro-value", json.dumps(AVRO_SCHEMA), "AVRO"),
                      register(url, "fuzz-protobuf-value", PROTO, "PROTOBUF"),
                      register(url, "fuzz-json-value", json.dumps(JSON_SCHEMA), "JSON"))


def message_class() -> Any:
    from google.protobuf import message_factory

    from tabletopic.registry.protobuf_schema import parse
    return message_factory.GetMessageClass(parse(PROTO, []).pool().FindMessageTypeByName("bench.Fuzz"))


def child(args: argparse.Namespace) -> None:
    registered = Registered(**json.loads(args.registered))
    case = next(c for c in cases(registered, message_class()) if c.name == args.child)
    tally = run_case(case, args.seed, args.inputs, Path(args.progress))
    print(json.dumps({"inputs": dict(tally.inputs), "rows": tally.rows, "failures": tally.failures,
                      "neither": tally.neither[:20], "neither_count": len(tally.neither), "seconds": tally.seconds}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--inputs", type=int, default=DEFAULT_INPUTS, help="inputs in all, shared by the cases")
    parser.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    parser.add_argument("--seed", type=int, default=20261126)
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--registered", help=argparse.SUPPRESS)
    parser.add_argument("--progress", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return

    from tabletopic.demo.broker import EmbeddedBroker
    from tabletopic.kafka.clients import KafkaClients
    from tabletopic.registry.service import SchemaRegistryService

    workdir = Path(tempfile.mkdtemp(prefix="tabletopic-fuzz-"))
    with EmbeddedBroker(log_path=workdir / "tansu.log") as broker:
        service = SchemaRegistryService("http://127.0.0.1:0", KafkaClients([broker.bootstrap_servers], {}),
                                        "_fuzz_schemas", "NONE")
        service.start()
        try:
            registered = register_all(service.url)
            names = [c.name for c in cases(registered, None)]
            chosen = [n for n in names if not args.cases or n in args.cases.split(",")]
            share = [args.inputs // len(chosen) + (1 if i < args.inputs % len(chosen) else 0)
                     for i in range(len(chosen))]
            print(f"fuzzing {args.inputs:,} inputs over {len(chosen)} cases ({', '.join(chosen)}), seed {args.seed}")
            results = run_children(dict(zip(chosen, share, strict=True)), args, registered, workdir)
        finally:
            service.stop()
    shutil.rmtree(workdir, ignore_errors=True)
    report(results)


def run_children(shares: dict[str, int], args: argparse.Namespace, registered: Registered,
                 workdir: Path) -> dict[str, dict[str, Any]]:
    names = list(shares)
    pending = list(enumerate(names))
    running: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}
    results: dict[str, dict[str, Any]] = {}
    while pending or running:
        while pending and len(running) < args.parallel:
            n, name = pending.pop(0)
            progress = workdir / f"{name}.progress"
            command = [sys.executable, __file__, "--child", name, "--seed", str(args.seed + n), "--inputs",
                       str(shares[name]), "--registered", json.dumps(registered.__dict__), "--progress", str(progress)]
            running[name] = (subprocess.Popen(command, stdout=subprocess.PIPE), progress)
        for name, (proc, progress) in list(running.items()):
            if proc.poll() is None:
                continue
            out = proc.stdout.read().decode() if proc.stdout else ""
            del running[name]
            if proc.returncode != 0:
                batch = progress.read_text() if progress.exists() else "?"
                seed = args.seed + names.index(name)
                results[name] = {"crash": f"exit {proc.returncode} in batch {batch} (seed {seed})",
                                 "inputs": {}, "rows": 0, "failures": 0, "neither_count": 0, "seconds": 0.0}
            else:
                results[name] = json.loads(out.strip().splitlines()[-1])
        time.sleep(0.2)
    return results


def report(results: dict[str, dict[str, Any]]) -> None:
    print("\n| case | inputs | valid | structured | mutated | rows | failures | neither | crashes | inputs/s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    total: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    for name, r in results.items():
        inputs = Counter(r["inputs"])
        kinds.update(inputs)
        count = sum(inputs.values())
        by = Counter({k.split(":")[0]: 0 for k in ("valid", "structured", "mutated")})
        for k, v in inputs.items():
            by[k.split(":")[0]] += v
        crash = 1 if "crash" in r else 0
        rate = count / r["seconds"] if r["seconds"] else 0
        print(f"| {name} | {count:,} | {by['valid']:,} | {by['structured']:,} | {by['mutated']:,} | {r['rows']:,} | "
              f"{r['failures']:,} | {r['neither_count']} | {crash} | {rate:,.0f} |")
        total.update({"inputs": count, "rows": r["rows"], "failures": r["failures"], "neither": r["neither_count"],
                      "crashes": crash})
        for line in r.get("neither", [])[:5]:
            print(f"  neither: {line}")
        if crash:
            print(f"  crash: {r['crash']}")
    print(f"| all | {total['inputs']:,} | | | | {total['rows']:,} | {total['failures']:,} | {total['neither']} | "
          f"{total['crashes']} | |")
    print("\ninputs by kind:")
    for kind, count in sorted(kinds.items()):
        print(f"  {kind}: {count:,}")
    if total["neither"] or total["crashes"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
