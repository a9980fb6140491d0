"""Connect's Cast rules over a column: which values each target type takes, and what each becomes.

The facts, from Connect's ``Cast``:

* Casts come from int8-64, float32/64, boolean, string and bytes (Decimal, a logical bytes type,
  included) and Timestamp, Date and Time (logical integers); to int8-64, float32/64, boolean and string.
  Bytes go only to string, as base64. A struct, array or map is no input; a null stays null.
* A number to a narrower integer keeps its low bits (Java's ``byteValue``/``intValue``): 300 as int8 is
  44. A floating value is cut toward zero, saturating at int32 (or int64) before that.
* To boolean: a number is true when its ``longValue`` is not 0 (0.5 is false); a string when it is
  ``true`` in any case.
* A string to a number is Java's ``parseInt``/``parseLong`` (digits with an optional sign) or
  ``parseDouble`` (surrounding whitespace, ``NaN``, ``Infinity``, exponents, a ``f``/``d`` suffix);
  what does not read fails the record: "Value (x) was out of range for requested data type".
* To string: Java's ``toString`` (doubles as ``Double.toString``), bytes as base64, a Decimal as
  ``BigDecimal.toString``, and a Timestamp, Date or Time as ``Values.dateFormatFor`` picks by the value:
  ``HH:mm:ss.SSS'Z'`` before 1970-01-02, ``yyyy-MM-dd`` at a midnight, else ``yyyy-MM-dd'T'HH:mm:ss.SSS'Z'``.
* A Timestamp, Date or Time to a number is its epoch milliseconds or days first.
"""

from __future__ import annotations

import base64
import re
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tabletopic.convert.java_text import java_double
from tabletopic_plugins.transforms.simple_date_format import DAY_MS, SimpleDateFormat

TARGETS = {"int8": pa.int8(), "int16": pa.int16(), "int32": pa.int32(), "int64": pa.int64(),
           "float32": pa.float32(), "float64": pa.float64(), "boolean": pa.bool_(), "string": pa.string()}
INTEGER_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
SUPPORTED_INPUT = "[INT8, INT16, INT32, INT64, FLOAT32, FLOAT64, BOOLEAN, STRING, BYTES]"
_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")
_JAVA_FLOAT = re.compile(r"[+-]?(NaN|Infinity|((\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)|(0[xX][0-9a-fA-F]*\.?[0-9a-fA-F]*"
                         r"[pP][+-]?\d+))[fFdD]?")
_TIME = SimpleDateFormat("HH:mm:ss.SSS'Z'")
_DATE = SimpleDateFormat("yyyy-MM-dd")
_TIMESTAMP = SimpleDateFormat("yyyy-MM-dd'T'HH:mm:ss.SSS'Z'")


class CastFailed(Exception):
    """Rows of a column that cannot be cast: ``mask`` marks them, ``reasons`` says why, one each."""

    def __init__(self, mask: np.ndarray, reasons: list[str]) -> None:
        super().__init__(reasons[0] if reasons else "")
        self.mask = mask
        self.reasons = reasons


def connect_type(arrow: pa.DataType) -> str:
    """The Connect schema type a column holds (logical types by their base type)."""
    if pa.types.is_integer(arrow):
        return {8: "INT8", 16: "INT16", 32: "INT32"}.get(arrow.bit_width, "INT64")
    if pa.types.is_float32(arrow) or pa.types.is_float16(arrow):
        return "FLOAT32"
    if pa.types.is_floating(arrow):
        return "FLOAT64"
    if pa.types.is_boolean(arrow):
        return "BOOLEAN"
    if pa.types.is_string(arrow) or pa.types.is_large_string(arrow):
        return "STRING"
    if pa.types.is_binary(arrow) or pa.types.is_large_binary(arrow) or pa.types.is_fixed_size_binary(arrow) \
            or pa.types.is_decimal(arrow):
        return "BYTES"
    if pa.types.is_timestamp(arrow) or pa.types.is_time(arrow) or pa.types.is_date64(arrow):
        return "INT64"
    if pa.types.is_date32(arrow):
        return "INT32"
    if pa.types.is_struct(arrow):
        return "STRUCT"
    if pa.types.is_map(arrow):
        return "MAP"
    if pa.types.is_list(arrow) or pa.types.is_large_list(arrow):
        return "ARRAY"
    return str(arrow).upper()


def _present(column: pa.Array) -> np.ndarray:
    return np.asarray(column.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def _fail_present(column: pa.Array, reason: str) -> CastFailed:
    mask = _present(column)
    return CastFailed(mask, [reason] * int(mask.sum()))


def epoch_millis(column: pa.Array) -> np.ndarray:
    """A temporal column as epoch milliseconds (nulls as 0)."""
    if pa.types.is_date32(column.type):
        return np.asarray(pc.fill_null(column.cast(pa.int32()), 0).to_numpy(), dtype=np.int64) * DAY_MS
    if pa.types.is_timestamp(column.type):
        raw = np.asarray(pc.fill_null(column.cast(pa.int64()), 0).to_numpy(), dtype=np.int64)
        per_ms = {"s": -1000, "ms": 1, "us": 1000, "ns": 1_000_000}[column.type.unit]
        return raw * 1000 if per_ms < 0 else np.floor_divide(raw, per_ms)
    if pa.types.is_date64(column.type):
        return np.asarray(pc.fill_null(column.cast(pa.int64()), 0).to_numpy(), dtype=np.int64)
    # time of day
    raw = np.asarray(pc.fill_null(column.cast(pa.int64()), 0).to_numpy(), dtype=np.int64)
    per_ms = {"s": -1000, "ms": 1, "us": 1000, "ns": 1_000_000}[column.type.unit]
    return raw * 1000 if per_ms < 0 else np.floor_divide(raw, per_ms)


def date_strings(millis: np.ndarray) -> pa.Array:
    """``Values.dateFormatFor``: the format is chosen by the value."""
    early = pa.array(millis < DAY_MS)
    midnight = pa.array(millis % DAY_MS == 0)
    later = pc.if_else(midnight, _DATE.format(millis), _TIMESTAMP.format(millis))
    return pc.if_else(early, _TIME.format(millis), later)


def _with_nulls(values: pa.Array, column: pa.Array) -> pa.Array:
    if not column.null_count:
        return values
    return pc.if_else(column.is_valid(), values, pa.nulls(len(values), values.type))


def _wrap(values: np.ndarray, target: str) -> np.ndarray:
    """int64 values to a narrower integer by their low bits, as Java's narrowing casts."""
    return values.astype(TARGETS[target].to_pandas_dtype())


def _float_to_integer(values: np.ndarray, target: str) -> np.ndarray:
    """Java's ``(int) d`` or ``(long) d``, then the low bits for byte and short."""
    truncated = np.trunc(np.nan_to_num(values, nan=0.0, posinf=np.inf, neginf=-np.inf))
    if target == "int64":
        out = np.where(truncated >= 2.0**63, np.iinfo(np.int64).max,
                       np.where(truncated < -(2.0**63), np.iinfo(np.int64).min, 0)).astype(np.int64)
        inside = (truncated < 2.0**63) & (truncated >= -(2.0**63))
        out[inside] = truncated[inside].astype(np.int64)
        return out
    as_int = np.clip(truncated, -(2.0**31), 2.0**31 - 1).astype(np.int64)
    return _wrap(as_int, target)


def _parse_integers(column: pa.Array, target: str) -> tuple[np.ndarray, CastFailed | None]:
    texts = column.to_pylist()
    bits = INTEGER_BITS[target]
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    out = np.zeros(len(texts), dtype=np.int64)
    bad = np.zeros(len(texts), dtype=bool)
    reasons = []
    for i, value in enumerate(texts):
        if value is None:
            continue
        if _JAVA_INTEGER.fullmatch(value) and low <= int(value) <= high:
            out[i] = int(value)
        else:
            bad[i] = True
            reasons.append(f"Value ({value}) was out of range for requested data type")
    return out, (CastFailed(bad, reasons) if bad.any() else None)


def java_parse_double(value: str) -> float | None:
    """``Double.parseDouble``; None where Java throws."""
    trimmed = value.strip(" \t\n\r\x0b\x0c\x00")
    if not _JAVA_FLOAT.fullmatch(trimmed):
        return None
    body = trimmed[:-1] if trimmed[-1] in "fFdD" and not trimmed.endswith("Infinity") else trimmed
    if "x" in body.lower() and "p" in body.lower():
        return float.fromhex(body)
    return float(body.replace("Infinity", "inf"))


def _parse_floats(column: pa.Array) -> tuple[np.ndarray, CastFailed | None]:
    texts = column.to_pylist()
    out = np.zeros(len(texts), dtype=np.float64)
    bad = np.zeros(len(texts), dtype=bool)
    reasons = []
    for i, value in enumerate(texts):
        if value is None:
            continue
        parsed = java_parse_double(value)
        if parsed is None:
            bad[i] = True
            reasons.append(f"Value ({value}) was out of range for requested data type")
        else:
            out[i] = parsed
    return out, (CastFailed(bad, reasons) if bad.any() else None)


def _decimal_integers(column: pa.Array, target: str) -> np.ndarray:
    bits = INTEGER_BITS[target] if target != "int64" else 64
    width = 32 if bits < 32 else bits
    out = []
    for value in column.to_pylist():
        if value is None:
            out.append(0)
            continue
        whole = int(Decimal(value).to_integral_value(rounding="ROUND_DOWN"))
        low = whole & ((1 << width) - 1)
        if low >= 1 << (width - 1):
            low -= 1 << width
        out.append(low)
    return _wrap(np.asarray(out, dtype=np.int64), target) if bits < 32 else np.asarray(out, dtype=np.int64)


def cast_column(column: pa.Array, target: str) -> pa.Array:
    """``column`` cast to ``target`` by Connect's rules; CastFailed names the rows that cannot be."""
    arrow = TARGETS[target]
    n = len(column)
    kind = connect_type(column.type)
    if pa.types.is_null(column.type) or column.null_count == n:
        return pa.nulls(n, arrow)
    if kind in ("STRUCT", "ARRAY", "MAP") or kind not in ("INT8", "INT16", "INT32", "INT64", "FLOAT32", "FLOAT64",
                                                           "BOOLEAN", "STRING", "BYTES"):
        raise _fail_present(column, f"Cast transformation does not support casting from {kind}; supported types "
                                    f"are {SUPPORTED_INPUT}")
    temporal = pa.types.is_temporal(column.type)
    decimal = pa.types.is_decimal(column.type)
    if target == "string":
        return _with_nulls(_to_string(column, temporal, decimal), column)
    if kind == "BYTES" and not decimal:
        raise _fail_present(column, "Unexpected type in Cast transformation: class java.nio.HeapByteBuffer")
    if temporal:
        values = epoch_millis(column)
        if pa.types.is_date32(column.type):
            values = values // DAY_MS
        elif pa.types.is_time(column.type):
            values = values % DAY_MS
        return _with_nulls(_from_integers(values, target), column)
    if decimal:
        if target in INTEGER_BITS:
            return _with_nulls(pa.array(_decimal_integers(column, target), arrow), column)
        floats = np.asarray([0.0 if v is None else float(v) for v in column.to_pylist()], dtype=np.float64)
        if target == "boolean":
            return _with_nulls(pa.array(_float_to_integer(floats, "int64") != 0, arrow), column)
        return _with_nulls(pa.array(floats.astype(arrow.to_pandas_dtype()), arrow), column)
    if kind == "STRING":
        if target == "boolean":
            return pc.equal(pc.utf8_lower(column), "true")
        if target in INTEGER_BITS:
            values, failed = _parse_integers(column, target)
            if failed is not None:
                raise failed
            return _with_nulls(pa.array(_wrap(values, target), arrow), column)
        floats, failed = _parse_floats(column)
        if failed is not None:
            raise failed
        return _with_nulls(pa.array(floats.astype(arrow.to_pandas_dtype()), arrow), column)
    if kind == "BOOLEAN":
        ones = np.asarray(pc.fill_null(column, False).to_numpy(zero_copy_only=False), dtype=bool)
        if target == "boolean":
            return column
        return _with_nulls(pa.array(ones.astype(arrow.to_pandas_dtype()), arrow), column)
    if kind in ("FLOAT32", "FLOAT64"):
        floats = np.asarray(pc.fill_null(column.cast(pa.float64()), 0.0).to_numpy(), dtype=np.float64)
        if target in INTEGER_BITS:
            return _with_nulls(pa.array(_float_to_integer(floats, target), arrow), column)
        if target == "boolean":
            return _with_nulls(pa.array(_float_to_integer(floats, "int64") != 0, arrow), column)
        return _with_nulls(pa.array(floats.astype(arrow.to_pandas_dtype()), arrow), column)
    integers = np.asarray(pc.fill_null(column.cast(pa.int64()), 0).to_numpy(), dtype=np.int64)
    return _with_nulls(_from_integers(integers, target), column)


def _from_integers(values: np.ndarray, target: str) -> pa.Array:
    arrow = TARGETS[target]
    if target in INTEGER_BITS:
        return pa.array(_wrap(values, target), arrow)
    if target == "boolean":
        return pa.array(values != 0, arrow)
    return pa.array(values.astype(arrow.to_pandas_dtype()), arrow)


def _to_string(column: pa.Array, temporal: bool, decimal: bool) -> pa.Array:
    kind = connect_type(column.type)
    if temporal:
        return date_strings(epoch_millis(column))
    if decimal:
        return pa.array([None if v is None else str(v) for v in column.to_pylist()], pa.string())
    if kind == "BYTES":
        return pa.array([None if v is None else base64.b64encode(v).decode() for v in column.to_pylist()],
                        pa.string())
    if kind == "BOOLEAN":
        return pc.if_else(column, "true", "false")
    if kind in ("FLOAT32", "FLOAT64"):
        single = kind == "FLOAT32"
        return pa.array([None if v is None else java_double(v, single) for v in column.to_pylist()], pa.string())
    if kind == "STRING":
        return column.cast(pa.string())
    return column.cast(pa.string())
