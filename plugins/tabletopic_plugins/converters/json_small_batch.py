"""A batch of a few schemaless JSON objects, read as Arrow's JSON reader would read it, without the reader.

Arrow's reader costs about 260 µs a call on this machine however few records it is given, and
1 µs a record after that. A Table Topic connector on a thousand quiet topics gets a record or two
per partition per fetch, and a call per partition: a trickle of one record per topic per second
filled the event loop with the reader alone. ``json.loads`` and ``pa.array`` read such a batch in
a fifth of the time.

The table must be the one the converter makes with the reader, or a topic's table would take its
types from how its records happened to be fetched. So the reader's inference is followed only where
its rules are plain (null, bool, int64, double, string, list, struct, and int64 with double is
double); a string is a string, as the converter reads it (json_converter._read_plain). For anything
else this returns None and the reader decides: an integer past int64, a number past a double,
duplicate keys, a value of two kinds, a list that starts with a null (which the reader mangles), or
anything ``pa.array`` refuses.
``tests/unit/plugins/converters/test_json_small_batch.py`` holds the two to the same tables.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

MAX_RECORDS = 4  # past about five records of ten fields the reader's fixed cost is paid back

_INT64 = (-(2**63), 2**63 - 1)
_KINDS = {type(None): pa.null(), bool: pa.bool_(), int: pa.int64(), float: pa.float64(), str: pa.string()}


class _Unsure(Exception):
    """A value whose reading by Arrow's reader these rules do not follow."""


def read_small(payloads: Sequence[bytes]) -> pa.Table | None:
    """The table Arrow's reader makes of ``payloads`` (one JSON object each), or None where unsure."""
    try:
        docs = [json.loads(p, object_pairs_hook=_object, parse_constant=_constant) for p in payloads]
        names: dict[str, pa.DataType] = {}
        for doc in docs:
            if not isinstance(doc, dict):
                return None
            for name, value in doc.items():
                _widen(names, name, _kind(value))
        if not names:  # only empty objects: rows without columns, as the reader gives them
            return pa.table({"_": pa.nulls(len(docs))}).drop_columns(["_"])
        columns = [pa.array([doc.get(name) for doc in docs], type=kind) for name, kind in names.items()]
        table = pa.Table.from_arrays(columns, names=list(names))
        table.validate(full=True)
        return table
    except (_Unsure, ValueError, TypeError, OverflowError, pa.ArrowException):
        return None


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    doc = dict(pairs)
    if len(doc) != len(pairs):
        raise _Unsure("a key twice")  # the reader refuses the record; json.loads would keep the last
    return doc


def _constant(name: str) -> Any:
    raise _Unsure(name)  # NaN and Infinity are not JSON; the reader refuses them


def _kind(value: Any) -> pa.DataType:
    kind = _KINDS.get(type(value))
    if kind is not None:
        if kind == pa.int64() and not _INT64[0] <= value <= _INT64[1]:
            raise _Unsure("an integer past int64")  # the reader makes it a double
        if kind == pa.float64() and not math.isfinite(value):
            raise _Unsure("a number past a double")
        return kind
    if isinstance(value, list):
        if value and value[0] is None:
            # The reader mangles a list that starts with a null (see json_converter._Mangled); the
            # converter then builds the batch from Python values, with other rules.
            raise _Unsure("a list that starts with a null")
        item: pa.DataType = pa.null()
        for element in value:
            item = _merge(item, _kind(element))
        return pa.list_(item)
    if isinstance(value, dict):  # its keys are distinct (see _object)
        return pa.struct([(name, _kind(child)) for name, child in value.items()])
    raise _Unsure(type(value).__name__)


def _merge(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    """The kind of a column holding values of kinds ``a`` and ``b``, as the reader widens it."""
    if a == b or pa.types.is_null(b):
        return a
    if pa.types.is_null(a):
        return b
    if {a, b} == {pa.int64(), pa.float64()}:
        return pa.float64()
    if pa.types.is_list(a) and pa.types.is_list(b):
        return pa.list_(_merge(a.value_type, b.value_type))
    if pa.types.is_struct(a) and pa.types.is_struct(b):
        fields = {f.name: f.type for f in a}
        for f in b:
            _widen(fields, f.name, f.type)
        return pa.struct(list(fields.items()))
    raise _Unsure(f"{a} and {b}")  # the reader refuses the batch; it finds out which record


def _widen(fields: dict[str, pa.DataType], name: str, kind: pa.DataType) -> None:
    """Field ``name`` also holds a value of ``kind``; a new field goes last, as the reader orders them."""
    fields[name] = _merge(fields[name], kind) if name in fields else kind
