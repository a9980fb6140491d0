"""Kafka Connect's ``org.apache.kafka.connect.json.JsonConverter``.

With ``schemas.enable=true`` (Connect's default) each value is the envelope
``{"schema": ..., "payload": ...}``; without, it is plain JSON, read as JSON holds it:
strings, numbers, booleans, objects and arrays. A string stays a string even where it looks
like a date (Arrow's reader would make a timestamp of it and lose its offset): a table's column
converts it by its own type (:mod:`tabletopic.write.column_conversion`).  Both parse a whole
batch with Arrow's JSON reader: payloads that share a schema are joined into one
newline-delimited buffer.  Only when the reader rejects a buffer are records parsed one by
one, to find the bad ones.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from tabletopic.config.input_limits import nesting_limit, setting_name
from tabletopic.convert.converter import Converted, ConvertResult, Failure, guarded, tabulate_isolating
from tabletopic.convert.input_guard import Lines, not_utf8, too_deep
from tabletopic_plugins.converters.connect_schema import (
    Node,
    SchemaError,
    compile_schema,
    finish,
    to_wire_python,
)
from tabletopic_plugins.converters.json_small_batch import MAX_RECORDS, read_small

_SCHEMA_PREFIX = b'{"schema":'
_PAYLOAD_SEP = b',"payload":'
# A fetch's parse on Arrow's threads lets the event loop and Faust's consumer thread go on meanwhile
# (a 2,000,000-record backlog: 309,017 records/s with them, 241,489 without). Handing a small batch
# to them costs more than its parse: 2.1x the CPU of parsing on the caller's thread for one record.
_READ = pj.ReadOptions(use_threads=True, block_size=1 << 24)
_READ_HERE = pj.ReadOptions(use_threads=False, block_size=1 << 24)
_THREADED_FROM_BYTES = 1 << 16
_ISO_PREFIX_LEN = 11  # "YYYY-MM-DDT"


class JsonConverter:
    def __init__(self) -> None:
        self.schemas_enable = True
        self.max_depth = nesting_limit({})
        self._depth_setting = setting_name(False)
        self._nodes: dict[bytes, Node | SchemaError] = {}
        # Fields Arrow's reader took for timestamps in earlier batches, read as strings from the start.
        self._string_fields: dict[str, pa.Field] = {}

    def configure(self, props: Mapping[str, str], is_key: bool) -> None:
        self.schemas_enable = props.get("schemas.enable", "true").strip().lower() == "true"
        self.max_depth = nesting_limit(props)
        self._depth_setting = setting_name(is_key)

    def convert(self, topic: str, data: Sequence[bytes]) -> ConvertResult:
        lines = Lines(data)
        # Before Arrow's reader sees anything: it recurses on the C stack (see input_guard.py).
        rejected = {**not_utf8(data, lines), **too_deep(data, self.max_depth, setting=self._depth_setting,
                                                       lengths=lines.lengths)}
        if not self.schemas_enable:
            result = self._convert_plain(data, lines, rejected)
            for part in result.parts:
                part.schemaless = True
            return result
        return guarded(data, rejected, self._convert_enveloped)

    def _convert_plain(self, data: Sequence[bytes], lines: Lines, rejected: dict[int, str]) -> ConvertResult:
        if not rejected and lines.one_line_objects():
            read = _read_few(data) if len(data) <= MAX_RECORDS else None
            read = read if read is not None else _read_lines(lines, self._string_fields)
            if read is not None:
                return read
        return guarded(data, rejected, lambda some: _convert_schemaless(some, self._string_fields))

    # -- schemas.enable=true ------------------------------------------------------------------
    def _convert_enveloped(self, data: Sequence[bytes]) -> ConvertResult:
        groups: dict[bytes, tuple[list[int], list[bytes]]] = {}
        result = ConvertResult()
        for i, value in enumerate(data):
            split = _split_envelope(value)
            if split is None:
                result.failures.append(Failure(i, _why_not_envelope(value)))
                continue
            schema_bytes, payload = split
            if payload.strip() == b"null":
                result.nulls.append(i)  # Connect's JsonConverter: a null value, whatever the schema
                continue
            entry = groups.get(schema_bytes)
            if entry is None:
                entry = groups[schema_bytes] = ([], [])
            entry[0].append(i)
            entry[1].append(payload)
        for schema_bytes, (indexes, payloads) in groups.items():
            node = self._node(schema_bytes)
            if isinstance(node, SchemaError):
                result.failures.extend(Failure(i, f"invalid Connect schema: {node}") for i in indexes)
                continue
            _convert_group(node, indexes, payloads, result)
        result.failures.sort(key=lambda f: f.index)
        return result

    def _node(self, schema_bytes: bytes) -> Node | SchemaError:
        node = self._nodes.get(schema_bytes)
        if node is None:
            try:
                node = compile_schema(json.loads(schema_bytes))
            except (SchemaError, ValueError, TypeError, KeyError) as exc:
                node = SchemaError(str(exc))
            if len(self._nodes) > 1024:  # schemas churn only on evolution; bound it anyway
                self._nodes.clear()
            self._nodes[schema_bytes] = node
        return node


def _split_envelope(value: bytes) -> tuple[bytes, bytes] | None:
    """Cut ``{"schema":S,"payload":P}`` into S and P without parsing P.

    Connect's own serializer writes exactly this layout; anything else (spaces,
    other key order) is re-serialised compactly, which costs a full parse.
    """
    value = value.strip()
    if value.startswith(_SCHEMA_PREFIX) and value.endswith(b"}"):
        cut = value.find(_PAYLOAD_SEP)
        if cut > 0:
            payload = value[cut + len(_PAYLOAD_SEP):-1]
            if b"\n" not in payload:
                return value[len(_SCHEMA_PREFIX):cut], payload
    try:
        doc = json.loads(value)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(doc, dict) or "schema" not in doc or "payload" not in doc:
        return None
    return (json.dumps(doc["schema"], separators=(",", ":")).encode(),
            json.dumps(doc["payload"], separators=(",", ":")).encode())


def _why_not_envelope(value: bytes) -> str:
    try:
        json.loads(value)
    except (ValueError, UnicodeDecodeError) as exc:
        return f"not valid JSON: {exc}"
    return ('JSON without the {"schema": ..., "payload": ...} envelope; '
            "set value.converter.schemas.enable=false for plain JSON")


def _convert_group(node: Node, indexes: list[int], payloads: list[bytes], result: ConvertResult) -> None:
    primitive = node.kind != "struct"
    if node.needs_python or primitive:
        _convert_python(node, indexes, payloads, result, primitive)
        return
    fast = [j for j, p in enumerate(payloads) if _one_line_object(p)]
    if len(fast) < len(payloads):
        # Only one-line objects go to Arrow's reader (see _convert_schemaless); the rest, one by one.
        slow = sorted(set(range(len(payloads))) - set(fast))
        _convert_python(node, [indexes[j] for j in slow], [payloads[j] for j in slow], result, primitive)
        if fast:
            _convert_group(node, [indexes[j] for j in fast], [payloads[j] for j in fast], result)
        return
    try:
        table = _read(payloads, pa.schema([pa.field(n, c.wire) for n, c in node.children]))
    except _Mangled:
        _convert_python(node, indexes, payloads, result, primitive)
        return
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        # One bad payload spoils the buffer: split to find it, keeping the rest fast.
        if len(payloads) == 1:
            result.failures.append(Failure(indexes[0], "payload does not match its schema"))
            return
        half = len(payloads) // 2
        _convert_group(node, indexes[:half], payloads[:half], result)
        _convert_group(node, indexes[half:], payloads[half:], result)
        return
    _finish_top(node, table, np.asarray(indexes, dtype=np.int64), result)


def _convert_python(node: Node, indexes: list[int], payloads: list[bytes], result: ConvertResult,
                    primitive: bool) -> None:
    rows, kept = [], []
    for i, payload in zip(indexes, payloads, strict=True):
        try:
            value = json.loads(payload)
            rows.append({"value": to_wire_python(value, node)} if primitive else to_wire_python(value, node))
            kept.append(i)
        except (ValueError, SchemaError, TypeError, AttributeError) as exc:
            result.failures.append(Failure(i, f"payload does not match its schema: {exc}"))
    wire = pa.struct([pa.field("value", node.wire)]) if primitive else node.wire
    try:
        array = pa.array(rows, wire)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
        if len(rows) <= 1:
            result.failures.extend(Failure(i, "payload does not match its schema") for i in kept)
            return
        half = len(kept) // 2
        _convert_python(node, kept[:half], payloads_for(kept[:half], indexes, payloads), result, primitive)
        _convert_python(node, kept[half:], payloads_for(kept[half:], indexes, payloads), result, primitive)
        return
    wrapped = Node(wire, wire, False, "struct", [("value", node)]) if primitive else node
    table = pa.Table.from_struct_array(array)
    _finish_top(wrapped, table, np.asarray(kept, dtype=np.int64), result, primitive)


def payloads_for(subset: list[int], indexes: list[int], payloads: list[bytes]) -> list[bytes]:
    where = {i: p for i, p in zip(indexes, payloads, strict=True)}
    return [where[i] for i in subset]


def _finish_top(node: Node, table: pa.Table, indexes: np.ndarray, result: ConvertResult,
                primitive: bool = False) -> None:
    columns, fields = [], []
    valid = None
    for name, child in node.children:
        column = table.column(name).combine_chunks() if table.num_rows else pa.array([], child.wire)
        if not child.optional and column.null_count:
            missing = column.is_valid()
            valid = missing if valid is None else pc.and_(valid, missing)
        columns.append(finish(column, child))
        fields.append(child.field(name, top_level=True))
    out = pa.Table.from_arrays(columns, schema=pa.schema(fields)) if fields else table
    if valid is not None:
        bad = np.flatnonzero(~np.asarray(valid.to_numpy(zero_copy_only=False), dtype=bool))
        names = [n for n, c in node.children if not c.optional]
        result.failures.extend(Failure(int(indexes[b]), f"null in a required field (one of {names})") for b in bad)
        keep = pc.invert(pc.is_in(pa.array(np.arange(len(indexes))), pa.array(bad)))
        out = pa.Table.from_arrays([c.filter(keep) for c in columns],
                                   schema=pa.schema(fields))
        indexes = indexes[np.asarray(keep.to_numpy(zero_copy_only=False), dtype=bool)]
    if len(indexes):
        result.parts.append(Converted(out, indexes, primitive=primitive))


# -- schemas.enable=false ---------------------------------------------------------------------
def _convert_schemaless(data: Sequence[bytes], strings: dict[str, pa.Field] | None = None) -> ConvertResult:
    result = ConvertResult()
    indexes: list[int] = []
    payloads: list[bytes] = []
    for i, value in enumerate(data):
        if _one_line_object(value):
            indexes.append(i)
            payloads.append(value)
            continue
        # Anything else is parsed here first (see _one_line_object).
        try:
            doc = json.loads(value)
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            result.failures.append(Failure(i, f"not valid JSON: {exc}"))
            continue
        if doc is None:
            result.nulls.append(i)  # Connect's JsonConverter reads null as a null value: a tombstone
        elif isinstance(doc, dict):
            indexes.append(i)
            payloads.append(json.dumps(doc, separators=(",", ":")).encode())
        else:
            result.failures.append(Failure(i, f"schemaless JSON must be an object, got {_json_type(doc)}"))
    order = np.argsort(np.asarray(indexes, dtype=np.int64), kind="stable")
    indexes = [indexes[j] for j in order]
    payloads = [payloads[j] for j in order]
    _infer_group(indexes, payloads, result, {} if strings is None else strings)
    result.failures.sort(key=lambda f: f.index)
    return result


def _read_lines(lines: Lines, strings: dict[str, pa.Field]) -> ConvertResult | None:
    """A batch of one-line objects read by Arrow's reader at once, from the bytes already joined; None
    if the reader refuses, for the value-by-value path to find out which value it refused."""
    try:
        table = _read_plain(lines.joined, lines.count, strings)
    except (_Mangled, pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    return ConvertResult.single(table, np.arange(lines.count, dtype=np.int64))


def _read_few(data: Sequence[bytes]) -> ConvertResult | None:
    """A few one-line objects, without the fixed cost of Arrow's reader (see json_small_batch.py)."""
    table = read_small(data)
    if table is None:
        return None
    return ConvertResult.single(table, np.arange(len(data), dtype=np.int64))


def _one_line_object(value: bytes) -> bool:
    """What Arrow's reader may be given: an object on one line. A newline would cut a value in two, and
    a buffer holding only non-objects (nulls) crashes the reader."""
    return value[:1] == b"{" and b"\n" not in value and b"\r" not in value


def _json_type(doc: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "a number",
             float: "a number"}
    return names.get(type(doc), type(doc).__name__)


def _infer_group(indexes: list[int], payloads: list[bytes], result: ConvertResult,
                 strings: dict[str, pa.Field]) -> None:
    if not payloads:
        return
    try:
        table = _read_plain(b"\n".join(payloads), len(payloads), strings)
    except _Mangled:
        _infer_python(indexes, [json.loads(p) for p in payloads], result)
        return
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        if len(payloads) == 1:
            result.failures.append(Failure(indexes[0], _schemaless_reason(payloads[0], exc)))
            return
        half = len(payloads) // 2
        _infer_group(indexes[:half], payloads[:half], result, strings)
        _infer_group(indexes[half:], payloads[half:], result, strings)
        return
    result.parts.append(Converted(table, np.asarray(indexes, dtype=np.int64)))


def _infer_python(indexes: list[int], docs: list[dict[str, Any]], result: ConvertResult) -> None:
    """Objects Arrow's reader could not hold, made into a table from Python values (types inferred by
    ``pa.array``, columns the union of the objects' keys); a value Arrow refuses fails alone."""
    tabulate_isolating(_python_table, docs, indexes, "cannot convert JSON object", result)


def _python_table(docs: list[dict[str, Any]]) -> pa.Table:
    names = list(dict.fromkeys(k for doc in docs for k in doc))
    if not names:  # only empty objects: rows without columns, as Arrow's reader gives them
        return pa.table({"_": pa.nulls(len(docs))}).drop_columns(["_"])
    table = pa.Table.from_arrays([pa.array([doc.get(n) for doc in docs]) for n in names], names=names)
    table.validate(full=True)
    return table


def _schemaless_reason(payload: bytes, exc: Exception) -> str:
    try:
        value: Any = json.loads(payload)
    except (ValueError, UnicodeDecodeError) as err:
        return f"not valid JSON: {err}"
    if not isinstance(value, dict):
        return f"schemaless JSON must be an object, got {_json_type(value)}"
    return f"cannot convert JSON object: {exc}"


def _read_plain(buffer: bytes, count: int, strings: dict[str, pa.Field]) -> pa.Table:
    """Plain JSON objects as JSON holds them. Arrow's reader takes a string that looks like a date for a
    timestamp, in UTC: ``"2023-05-18T11:22:33-08:00"`` comes out 19:22:33, its offset gone, and
    ``"2023-05-18"`` a midnight. A field it did that to is read again as strings, and ``strings``
    remembers it, so that the next batches are read once."""
    if strings:
        try:
            table = _read_joined(buffer, count, pa.schema(list(strings.values())), infer_others=True)
            if _as_strings(table.schema) is None:
                return _in_reading_order(table, buffer)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass  # a field remembered as a string holds something else here: the reader infers them all
    table = _read_joined(buffer, count)
    fields = _as_strings(table.schema)
    if fields is None:
        return table
    strings.update({f.name: f for f in fields})
    return _read_joined(buffer, count, pa.schema(fields), infer_others=True).select(table.column_names)


def _in_reading_order(table: pa.Table, buffer: bytes) -> pa.Table:
    """The columns in the order the reader alone gives them, by first appearance: the given fields come
    first otherwise. The first object's keys, then the others as read."""
    first = json.loads(buffer.split(b"\n", 1)[0])
    order = [name for name in first if name in table.column_names]
    return table.select(order + [name for name in table.column_names if name not in first])


def _as_strings(schema: pa.Schema) -> list[pa.Field] | None:
    """The fields holding a timestamp anywhere (JSON has none: the reader made them of strings), typed
    with strings in their place; None if there is none."""
    changed = [f.with_type(_stamps_as_strings(f.type)) for f in schema if _holds_stamps(f.type)]
    return changed or None


def _holds_stamps(kind: pa.DataType) -> bool:
    if pa.types.is_timestamp(kind):
        return True
    if pa.types.is_struct(kind):
        return any(_holds_stamps(f.type) for f in kind)
    return pa.types.is_list(kind) and _holds_stamps(kind.value_type)


def _stamps_as_strings(kind: pa.DataType) -> pa.DataType:
    if pa.types.is_timestamp(kind):
        return pa.string()
    if pa.types.is_struct(kind):
        return pa.struct([f.with_type(_stamps_as_strings(f.type)) for f in kind])
    if pa.types.is_list(kind):
        return pa.list_(kind.value_field.with_type(_stamps_as_strings(kind.value_type)))
    return kind


def _read(payloads: list[bytes], schema: pa.Schema | None) -> pa.Table:
    return _read_joined(b"\n".join(payloads), len(payloads), schema)


def _read_joined(buffer: bytes, count: int, schema: pa.Schema | None = None, infer_others: bool = False) -> pa.Table:
    """``schema``'s fields as it types them; with ``infer_others``, the other fields as the reader infers
    them, else none."""
    parse = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="infer" if infer_others else "ignore") \
        if schema is not None else pj.ParseOptions(newlines_in_values=False)
    table = pj.read_json(io.BytesIO(buffer), read_options=_READ if len(buffer) >= _THREADED_FROM_BYTES else _READ_HERE,
                         parse_options=parse)
    if table.num_rows != count:
        raise pa.ArrowInvalid(f"expected {count} JSON objects, read {table.num_rows}")
    try:
        table.validate()  # structure only: tens of microseconds a table
    except pa.ArrowInvalid as exc:
        raise _Mangled(str(exc)) from exc
    return table


class _Mangled(Exception):
    """Arrow's reader parsed valid JSON into arrays that break Arrow's own invariants (pyarrow 26 makes
    a list holding several nulls longer than its values); such arrays must never reach a table, so
    the batch is built again from Python values."""

