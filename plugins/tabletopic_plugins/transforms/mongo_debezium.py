"""``org.apache.iceberg.connect.transforms.MongoDebeziumTransform``: Debezium MongoDB events, whose images are
Extended JSON strings, to events whose images are structs, as the Iceberg sink's transform makes them.

As the Iceberg sink's (which uses Debezium's ``MongoDataConverter``):

* The key ``{id: <Extended JSON>}`` becomes ``{id: <value>}``; ``after`` and ``before`` become structs; the
  envelope's other fields stay. An event whose key has no ``id`` or whose value is no such envelope
  becomes a record with a null key and a null value; a tombstone passes.
* An update without ``after`` but with ``updateDescription`` gets an ``after`` made of ``before`` (or
  nothing) with ``updatedFields`` set, ``removedFields`` removed and ``_id`` from the key.
* An event with neither image nor ``updateDescription`` fails ("malformed record").
* BSON types: string, ObjectId (its hex), Decimal128, JavaScript and null are strings; double, int32,
  int64, boolean and binary keep their types; a date and a BSON timestamp are timestamps; a document is a
  struct; a regular expression is ``{regex, options}``. ``array_handling_mode=array`` (the default) makes
  an array of one element type (documents merged into one struct); mixed types fail the record.
  ``document`` makes a struct with fields ``_0``, ``_1``, ...
* An empty document is left out: an Iceberg struct needs a field.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa

from tabletopic.convert.records import SinkRecords, no_columns
from tabletopic.transform.chain import RowsFailed
from tabletopic_plugins.transforms.connect_record import KEY, VALUE, operand, text

_INT32 = (-(2**31), 2**31 - 1)
_TIMESTAMP = pa.timestamp("us", tz="UTC")


@dataclass(frozen=True)
class Bson:
    """A BSON value read from Extended JSON: its type's name and a Python value."""

    kind: str
    value: Any


class BsonError(ValueError):
    pass


def _special(pairs: list[tuple[str, Any]]) -> Any:
    keys = [k for k, _ in pairs]
    d = dict(pairs)
    first = keys[0] if keys else ""
    if not first.startswith("$"):
        return Bson("DOCUMENT", d)
    if keys == ["$oid"]:
        return Bson("OBJECT_ID", str(d["$oid"]))
    if keys == ["$numberLong"]:
        return Bson("INT64", int(_plain(d["$numberLong"])))
    if keys == ["$numberInt"]:
        return Bson("INT32", int(_plain(d["$numberInt"])))
    if keys == ["$numberDouble"]:
        return Bson("DOUBLE", float(str(_plain(d["$numberDouble"])).replace("Infinity", "inf")))
    if keys == ["$numberDecimal"]:
        return Bson("DECIMAL128", str(Decimal(str(_plain(d["$numberDecimal"])))))
    if keys == ["$date"]:
        return Bson("DATE_TIME", _date_millis(d["$date"]))
    if keys == ["$timestamp"]:
        stamp = _plain(d["$timestamp"])
        return Bson("TIMESTAMP", int(_plain(stamp["t"])) * 1000)
    if "$binary" in d:
        raw = _plain(d["$binary"])
        data = raw["base64"] if isinstance(raw, dict) else raw
        return Bson("BINARY", base64.b64decode(_plain(data)))
    if keys == ["$uuid"]:
        return Bson("BINARY", uuid.UUID(str(d["$uuid"])).bytes)
    if keys == ["$regularExpression"]:
        regex = _plain(d["$regularExpression"])
        return Bson("REGULAR_EXPRESSION", {"regex": regex.get("pattern"), "options": regex.get("options")})
    if "$regex" in d:
        return Bson("REGULAR_EXPRESSION", {"regex": _plain(d["$regex"]), "options": _plain(d.get("$options", ""))})
    if keys == ["$code"]:
        return Bson("JAVASCRIPT", _plain(d["$code"]))
    if set(keys) == {"$code", "$scope"}:
        return Bson("JAVASCRIPT_WITH_SCOPE", {"code": _plain(d["$code"]), "scope": d["$scope"]})
    if keys == ["$undefined"]:
        return Bson("UNDEFINED", None)
    for name, kind in (("$symbol", "SYMBOL"), ("$minKey", "MIN_KEY"), ("$maxKey", "MAX_KEY"),
                       ("$dbPointer", "DB_POINTER")):
        if name in d:
            return Bson(kind, None)
    return Bson("DOCUMENT", d)


def _plain(value: Any) -> Any:
    """A value inside an Extended JSON wrapper, as the JSON it was."""
    if isinstance(value, Bson):
        if value.kind == "DOCUMENT":
            return {k: _plain(v) for k, v in value.value.items()}
        return value.value
    return value


def _date_millis(value: Any) -> int:
    value = _plain(value)
    if isinstance(value, dict) and "$numberLong" in value:
        return int(value["$numberLong"])
    if isinstance(value, str):
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        return int(parsed.timestamp() * 1000)
    return int(value)


def parse_extended_json(text_value: str) -> Bson:
    """A document in MongoDB Extended JSON (canonical or relaxed), as BsonDocument.parse reads it."""
    try:
        parsed = json.loads(text_value, object_pairs_hook=_special, parse_int=_integer, parse_float=float,
                            parse_constant=lambda c: float(c.replace("Infinity", "inf")))
    except (ValueError, TypeError, KeyError) as exc:
        raise BsonError(f"not Extended JSON: {exc}") from None
    if not isinstance(parsed, Bson) or parsed.kind != "DOCUMENT":
        raise BsonError("Extended JSON of a document must be an object")
    return parsed


def _integer(digits: str) -> int:
    return int(digits)


def _kind(value: Any) -> str:
    if isinstance(value, Bson):
        return value.kind
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "BOOLEAN"
    if isinstance(value, int):
        return "INT32" if _INT32[0] <= value <= _INT32[1] else "INT64"
    if isinstance(value, float):
        return "DOUBLE"
    if isinstance(value, str):
        return "STRING"
    if isinstance(value, list):
        return "ARRAY"
    raise BsonError(f"unexpected Extended JSON value {value!r}")


_SIMPLE = {"NULL": pa.string(), "STRING": pa.string(), "JAVASCRIPT": pa.string(), "OBJECT_ID": pa.string(),
           "DECIMAL128": pa.string(), "DOUBLE": pa.float64(), "BINARY": pa.binary(), "INT32": pa.int32(),
           "INT64": pa.int64(), "DATE_TIME": _TIMESTAMP, "TIMESTAMP": _TIMESTAMP, "BOOLEAN": pa.bool_()}
_REGEX = pa.struct([("regex", pa.string()), ("options", pa.string())])


class _Converter:
    def __init__(self, arrays_as_documents: bool) -> None:
        self.documents = arrays_as_documents

    def document_type(self, doc: dict[str, Any]) -> pa.StructType:
        fields = []
        for key, value in doc.items():
            arrow = self.value_type(value)
            if arrow is not None:
                fields.append(pa.field(key, arrow))
        return pa.struct(fields)

    def value_type(self, value: Any) -> pa.DataType | None:
        kind = _kind(value)
        if kind in _SIMPLE:
            return _SIMPLE[kind]
        if kind == "DOCUMENT":
            struct = self.document_type(value.value)
            return struct if struct.num_fields else None
        if kind == "REGULAR_EXPRESSION":
            return _REGEX
        if kind == "JAVASCRIPT_WITH_SCOPE":
            scope = self.document_type(_as_document(value.value["scope"]))
            return pa.struct([("code", pa.string())] + ([("scope", scope)] if scope.num_fields else []))
        if kind == "UNDEFINED":
            return None
        if kind == "ARRAY":
            return self._array_type(value)
        raise BsonError(f"The value type {kind} is not supported")

    def _array_type(self, items: list[Any]) -> pa.DataType | None:
        if self.documents:
            struct = self.document_type({f"_{i}": item for i, item in enumerate(items)})
            return struct if struct.num_fields else None
        if not items:
            return pa.list_(pa.string())
        kinds = {_kind(i) for i in items}
        simple = {_SIMPLE.get(k, k) for k in kinds}
        if len(simple) > 1:
            raise BsonError(f"Array elements with different Bson types are not supported: {sorted(kinds)}")
        kind = next(iter(kinds))
        if kind == "DOCUMENT":
            merged: dict[str, Any] = {}
            for item in items:
                merged.update(item.value)
            struct = self.document_type(merged)
            return pa.list_(struct) if struct.num_fields else None
        element = self.value_type(items[0]) if kind != "ARRAY" else self._array_type(
            [x for item in items for x in item])
        return pa.list_(element) if element is not None else None

    def value(self, value: Any, arrow: pa.DataType) -> Any:
        kind = _kind(value)
        if kind == "NULL":
            return None
        if kind == "DOCUMENT":
            return {f.name: self.value(value.value.get(f.name), f.type) for f in arrow} if value.value is not None \
                else None
        if kind == "ARRAY":
            if self.documents:
                return {f.name: self.value(value[int(f.name[1:])], f.type) for f in arrow}
            return [self.value(v, arrow.value_type) for v in value]
        if kind == "JAVASCRIPT_WITH_SCOPE":
            out = {"code": value.value["code"]}
            if arrow.get_field_index("scope") >= 0:
                scope = _as_document(value.value["scope"])
                out["scope"] = self.value(Bson("DOCUMENT", scope), arrow.field("scope").type)
            return out
        if isinstance(value, Bson):
            if kind in ("DATE_TIME", "TIMESTAMP"):
                return dt.datetime.fromtimestamp(value.value / 1000, dt.UTC)
            return value.value
        return value


def _as_document(value: Any) -> dict[str, Any]:
    return value.value if isinstance(value, Bson) and value.kind == "DOCUMENT" else {}


class MongoDebeziumTransform:
    keys = frozenset(("array_handling_mode",))
    needs_key = True

    def configure(self, props: Mapping[str, str]) -> None:
        mode = (text(props, "array_handling_mode") or "array").strip().lower()
        if mode not in ("array", "document"):
            mode = "array"  # as Debezium's ArrayEncoding.parse with its default
        self.converter = _Converter(mode == "document")

    def apply(self, records: SinkRecords) -> list[SinkRecords] | SinkRecords:
        value = operand(records, VALUE)
        if value is None:
            return records
        key = operand(records, KEY)
        if not _valid_key(key, records.key_primitive) or records.primitive or not _valid_envelope(value):
            return records.as_tombstones().with_key(no_columns(len(records)), False)
        ids = key.column("id").to_pylist() if key is not None else []
        columns = {name: value.column(name).to_pylist() for name in ("after", "before", "updateDescription")
                   if name in value.column_names}
        built: list[tuple[dict[str, Any], dict[str, Any]]] = []
        failed = np.zeros(len(records), dtype=bool)
        reasons: list[str] = []
        for i in range(len(records)):
            try:
                built.append(self._event(ids[i], {n: c[i] for n, c in columns.items()}))
            except (BsonError, ValueError, TypeError, KeyError) as exc:
                failed[i] = True
                reasons.append(str(exc))
                built.append(({}, {}))
        if failed.any():
            raise RowsFailed(failed, reasons)
        return self._batches(records, value, built)

    def _event(self, key_id: Any, images: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        key_doc = parse_extended_json('{ "id" : ' + str(key_id) + "}").value
        after, before, update = images.get("after"), images.get("before"), images.get("updateDescription")
        if before is None and after is None and update is None:
            raise ValueError("malformed record: no before, after or updateDescription")
        before_doc = parse_extended_json(before).value if before is not None else None
        after_doc: dict[str, Any] | None
        if after is None and update is not None:
            after_doc = dict(before_doc or {})
            updated = update.get("updatedFields") if isinstance(update, dict) else None
            if updated is not None:
                after_doc.update(parse_extended_json(updated).value)
            for removed in (update.get("removedFields") or []) if isinstance(update, dict) else []:
                after_doc.pop(removed, None)
            after_doc.setdefault("_id", key_doc.get("id"))
        else:
            after_doc = parse_extended_json(after).value if after is not None else None
        return key_doc, {"after": after_doc, "before": before_doc}

    def _batches(self, records: SinkRecords, value: pa.Table,
                 built: list[tuple[dict[str, Any], dict[str, Any]]]) -> list[SinkRecords]:
        groups: dict[tuple[pa.DataType, ...], list[int]] = {}
        types = []
        for i, (key_doc, images) in enumerate(built):
            shape = (self.converter.document_type(key_doc),
                     *(self.converter.document_type(images[n]) if images[n] is not None else pa.null()
                       for n in ("after", "before")))
            types.append(shape)
            groups.setdefault(shape, []).append(i)
        out = []
        for shape, rows in groups.items():
            mask = np.zeros(len(records), dtype=bool)
            mask[rows] = True
            part = records.take(mask)
            key_type, after_type, before_type = shape
            key = pa.Table.from_pylist([self.converter.value(Bson("DOCUMENT", built[i][0]), key_type) for i in rows],
                                       schema=pa.schema(list(key_type)))
            table = value.filter(pa.array(mask))
            columns, names = [], []
            for name, column in zip(table.column_names, table.columns, strict=True):
                if name in ("after", "before"):
                    arrow = after_type if name == "after" else before_type
                    if pa.types.is_null(arrow):
                        continue
                    docs = [self.converter.value(Bson("DOCUMENT", built[i][1][name]), arrow) for i in rows]
                    columns.append(pa.array(docs, arrow))
                else:
                    columns.append(column.combine_chunks())
                names.append(name)
            out.append(part.with_value(pa.Table.from_arrays(columns, names=names)).with_key(key, False))
        return out


def _valid_key(key: pa.Table | None, primitive: bool) -> bool:
    return key is not None and not primitive and "id" in key.column_names


def _valid_envelope(value: pa.Table) -> bool:
    names = set(value.column_names)
    return "op" in names and bool({"after", "before", "updateDescription"} & names)
