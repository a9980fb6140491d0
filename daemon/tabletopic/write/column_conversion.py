"""A record's value into a table column of another type, by the Iceberg Kafka Connect sink's rules.

The Java sink converts each value to its column's type (``RecordConverter``); this does the same to a
whole Arrow column at once. The rules, by the column's type:

* ``int``, ``long``: a number, its whole part (Java's ``intValue``: a fraction is cut, a value out of
  range wraps, ``NaN`` is 0, an infinite one is the range's end); a string of digits with an optional
  sign. A boolean is refused.
* ``float``, ``double``: a number; a string Java's ``parseDouble`` reads (spaces around it, ``NaN``,
  ``Infinity``, an exponent, a trailing ``d`` or ``f``).
* ``decimal(P, S)``: a number or a numeric string, rounded half away from zero to ``S`` places (a
  double by its shortest decimal form, as ``BigDecimal.valueOf``); refused only past ``P`` digits.
* ``boolean``: a boolean; a string, true when it is ``true`` in any case and false otherwise (Java's
  ``parseBoolean``). A number is refused.
* ``string``: a string; a number or boolean as Java prints it (``1.0E10``); an object or array as JSON;
  a date, time, timestamp or binary as Arrow prints it (the Java sink refuses those).
* ``uuid``: a string in UUID form (any case). ``binary``, ``fixed``: bytes, or a base64 string.
* ``date``: a number of days since 1970-01-01; ``YYYY-MM-DD``; a timestamp's UTC day.
* ``timestamp``, ``timestamptz``: a number of milliseconds since the epoch (a Kafka producer's, and
  Connect's ``Timestamp``); a string ``YYYY-MM-DD[T| ]HH:MM[:SS[.fraction]]`` (fraction to nanoseconds,
  kept to microseconds) with an optional offset ``Z``, ``+HH``, ``+HHMM`` or ``+HH:MM``. Into
  ``timestamptz`` a string without an offset is UTC; into ``timestamp`` an offset is dropped and the
  local time kept. A timestamp of either kind keeps its instant (its UTC wall time without a zone).

With ``strict`` rules (``tabletopic.values.strict=true``) the lossy ones refuse instead: a fraction or
an out-of-range number into an integer column, and a boolean string other than ``true`` or
``false``. docs/tables.md says where each differs from the Java sink.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tabletopic.convert.java_text import java_double

# Field metadata that says what Iceberg type a column has where its Arrow type does not tell.
ICEBERG_TYPE = b"iceberg.type"

_TIMESTAMP = (r"^(?P<d>\d{4}-\d{2}-\d{2})[T ](?P<hm>\d{2}:\d{2})(?::(?P<s>\d{2})(?:\.(?P<f>\d{1,9}))?)?"
              r"(?P<z>Z|[+-]\d{2}(?::?\d{2})?)?$")
_TIMESTAMP_SHAPE = re.sub(r"\(\?P<\w+>", "(?:", _TIMESTAMP)  # the same without captures: a quicker check
_NOT_A_TIMESTAMP = "not a timestamp (YYYY-MM-DDTHH:MM[:SS[.fraction]] with an optional Z, +HH, +HHMM or +HH:MM)"
_INTEGER = r"^[+-]?\d+$"
_DECIMAL = r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$"
_DATE = r"^\d{4}-\d{2}-\d{2}$"
_UUID = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
_JAVA_DOUBLE = re.compile(r"^[+-]?(NaN|Infinity|(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)[dDfF]?$")
_INT_RANGE = {pa.int32(): (-(2**31), 2**31 - 1), pa.int64(): (-(2**63), 2**63 - 1)}


class ValueConversionError(ValueError):
    """A value this column cannot take; the message says which value and why."""


@dataclass(frozen=True)
class ConversionRules:
    strict: bool = False  # refuse what Java's rules would change (a cut fraction, a wrapped number)


JAVA_RULES = ConversionRules()


def iceberg_type_of(column: pa.Field) -> str | None:
    """The Iceberg type a column's metadata names where its Arrow type does not tell it (uuid, fixed[L])."""
    named = (column.metadata or {}).get(ICEBERG_TYPE)
    return named.decode() if named is not None else None


def converts(source: pa.DataType, target: pa.DataType, iceberg_type: str | None = None) -> bool:
    """Whether values of ``source`` may go into a column of ``target`` (some values may still be refused)."""
    if source == target or pa.types.is_null(source):
        return True
    if iceberg_type == "uuid" or (iceberg_type or "").startswith("fixed"):
        return _is_string(source) or pa.types.is_binary(source) or pa.types.is_fixed_size_binary(source)
    if _is_string(target):
        return not pa.types.is_dictionary(source)
    if pa.types.is_boolean(target):
        return pa.types.is_boolean(source) or _is_string(source)
    if pa.types.is_integer(target) or pa.types.is_floating(target) or pa.types.is_decimal(target):
        return _is_number(source) or _is_string(source)
    if pa.types.is_date(target):
        return _is_number(source) or _is_string(source) or pa.types.is_date(source) or pa.types.is_timestamp(source)
    if pa.types.is_timestamp(target):
        return (_is_number(source) or _is_string(source) or pa.types.is_timestamp(source)
                or pa.types.is_date(source))
    if pa.types.is_binary(target) or pa.types.is_fixed_size_binary(target):
        return _is_string(source) or pa.types.is_binary(source) or pa.types.is_fixed_size_binary(source)
    return False


def convert(array: pa.Array, target: pa.DataType, rules: ConversionRules = JAVA_RULES,
            iceberg_type: str | None = None) -> pa.Array:
    """``array``'s values as ``target`` values (a primitive type); raises ValueConversionError for a value
    the rules refuse, naming the first."""
    source = array.type
    if pa.types.is_dictionary(source):
        array, source = array.dictionary_decode(), source.value_type
    if pa.types.is_large_string(source):
        array, source = array.cast(pa.string()), pa.string()
    if source == target and iceberg_type is None:
        return array
    if pa.types.is_null(source):
        return pa.nulls(len(array), target)
    if iceberg_type == "uuid":
        return _to_uuid(array, target)
    if iceberg_type is not None and iceberg_type.startswith("fixed"):
        return _to_fixed(array, target, int(iceberg_type[6:-1]))
    if _is_string(target):
        return _to_string(array)
    if pa.types.is_boolean(target):
        return _to_boolean(array, rules)
    if pa.types.is_integer(target):
        return _to_integer(array, target, rules)
    if pa.types.is_floating(target):
        return _to_floating(array, target)
    if pa.types.is_decimal(target):
        return _to_decimal(array, target)
    if pa.types.is_date(target):
        return _to_date(array, target, rules)
    if pa.types.is_timestamp(target):
        return _to_timestamp(array, target, rules)
    if pa.types.is_binary(target) or pa.types.is_fixed_size_binary(target):
        return _to_binary(array, target)
    return _cast(array, target)


# -- numbers -------------------------------------------------------------------------------------
def _to_integer(array: pa.Array, target: pa.DataType, rules: ConversionRules) -> pa.Array:
    source = array.type
    low, high = _INT_RANGE.get(target, (-(2**63), 2**63 - 1))
    if _is_string(source):
        _check_matches(array, _INTEGER, f"not a whole number for a {target} column")
        wide = _cast(pc.replace_substring_regex(array, r"^\+", ""), pa.decimal128(38, 0))
        _check_range(wide, low, high, target)  # Java's parseInt refuses what does not fit, in any rules
        return _cast(wide, target)
    if pa.types.is_floating(source):
        return _whole_floats(array, target, low, high, rules)
    if pa.types.is_decimal(source):
        whole = pc.round(array, 0, round_mode="towards_zero")
        if rules.strict:
            _refuse_where(array, _not_equal(whole, array), f"not a whole number for a {target} column")
        whole = _cast(whole, pa.decimal128(38, 0))
        if rules.strict:
            _check_range(whole, low, high, target)
            return _cast(whole, target)
        return _wrap(whole, target)
    if pa.types.is_integer(source):
        if rules.strict:
            _check_range(array, low, high, target)
            return _cast(array, target)
        return _wrap(array, target)
    raise ValueConversionError(f"a {source} cannot go into a {target} column")


def _whole_floats(array: pa.Array, target: pa.DataType, low: int, high: int, rules: ConversionRules) -> pa.Array:
    """Java's narrowing of a double: the fraction cut, the range's end for what is past it, 0 for NaN."""
    nulls = np.asarray(array.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    values = np.asarray(array.to_numpy(zero_copy_only=False), dtype=np.float64)
    nan = np.isnan(values) & ~nulls
    whole = np.trunc(np.where(np.isnan(values), 0.0, values))
    above, below = whole >= float(high), whole <= float(low)
    if rules.strict:
        _refuse_where(array, nan | (whole != np.where(nan, 0.0, values)) | (values > high) | (values < low),
                      f"not a whole number within a {target} column's range")
    ints = np.zeros(len(values), dtype=np.int64)
    inside = ~(above | below)
    ints[inside] = whole[inside].astype(np.int64)
    ints[above], ints[below] = high, low
    return pa.array(ints, pa.int64(), mask=nulls).cast(target)


def _wrap(array: pa.Array, target: pa.DataType) -> pa.Array:
    """Java's narrowing: the value's low bits, as two's complement (3000000000 into an int is -1294967296)."""
    if pa.types.is_decimal(array.type):
        # Beyond 64 bits only Python's integers hold the value; a rare path.
        values = [None if v is None else (int(v) & 0xFFFFFFFFFFFFFFFF) for v in array.to_pylist()]
        array = pa.array([None if v is None else v - (1 << 64) if v >= 1 << 63 else v for v in values], pa.int64())
    return array.cast(pa.int64(), safe=False).cast(target, safe=False)


def _to_floating(array: pa.Array, target: pa.DataType) -> pa.Array:
    source = array.type
    if _is_string(source):
        stripped = pc.utf8_trim_whitespace(array)
        _check_java_double(stripped, target)
        plain = pc.replace_substring_regex(stripped, r"[dDfF]$", "")
        plain = pc.replace_substring_regex(plain, r"^\+", "")
        return _cast(_cast(plain, pa.float64()), target, safe=False)
    if _is_number(source):
        return _cast(array, target, safe=False)
    raise ValueConversionError(f"a {source} cannot go into a {target} column")


def _to_decimal(array: pa.Array, target: pa.DataType) -> pa.Array:
    source = array.type
    if pa.types.is_boolean(source):
        raise ValueConversionError(f"a boolean cannot go into a {target} column")
    if pa.types.is_floating(source):
        # BigDecimal.valueOf(double): the double's shortest decimal form, not its binary value (1.005
        # rounds to 1.01, where its binary value, 1.00499..., would round to 1.00).
        values = array.to_numpy(zero_copy_only=False)
        finite = np.isfinite(values) | ~array.is_valid().to_numpy(zero_copy_only=False)
        if not finite.all():
            _refuse_where(array, ~finite, f"not a finite number for a {target} column")
        array = pc.cast(array, pa.string())
        source = pa.string()
    if _is_string(source):
        _check_matches(array, _DECIMAL, f"not a decimal number for a {target} column")
        return _round_decimal(_parse_decimal(array), target)
    if pa.types.is_integer(source):
        return _round_decimal(_cast(array, pa.decimal128(38, 0)), target)
    if pa.types.is_decimal(source):
        return _round_decimal(array, target)
    raise ValueConversionError(f"a {source} cannot go into a {target} column")


def _parse_decimal(strings: pa.Array) -> pa.Array:
    """Numeric strings as one decimal type that holds every one of them exactly, where it can."""
    exponents = pc.extract_regex(strings, r"^[^eE]*(?:[eE](?P<e>[+-]?\d+))?$").field("e")
    if pc.any(pc.not_equal(exponents, "")).as_py():
        # An exponent: through Python's decimals, whose reading of the string is exact.
        values = [None if s is None else Decimal(s) for s in strings.to_pylist()]
        scale = max((-int(v.as_tuple().exponent) for v in values if v is not None and v.is_finite()), default=0)
        scale = max(0, min(scale, 38))
        quantum = Decimal(1).scaleb(-scale)
        try:
            return pa.array([None if v is None else v.quantize(quantum) for v in values], pa.decimal128(38, scale))
        except (pa.ArrowInvalid, ArithmeticError) as exc:
            raise ValueConversionError(f"a number too large for a decimal column: {exc}") from exc
    fractions = pc.utf8_length(pc.replace_substring_regex(strings, r"^[^.]*\.?", ""))
    scale = int(pc.max(fractions).as_py() or 0)
    digits = int(pc.max(pc.utf8_length(strings)).as_py() or 1)
    if digits > 38:
        raise ValueConversionError("a number of more than 38 digits cannot go into a decimal column")
    return _cast(pc.replace_substring_regex(strings, r"^\+", ""), pa.decimal128(38, min(scale, 38)))


def _round_decimal(array: pa.Array, target: pa.DataType) -> pa.Array:
    """Rounded half away from zero (Java's HALF_UP) to ``target``'s scale; refused past its precision."""
    source = array.type
    if source.scale > target.scale:
        array = pc.round(array, target.scale, round_mode="half_towards_infinity")
    try:
        return array.cast(pa.decimal128(38, target.scale)).cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise ValueConversionError(f"a number with more digits than a {target} column holds: {exc}") from exc


# -- booleans and strings ------------------------------------------------------------------------
def _to_boolean(array: pa.Array, rules: ConversionRules) -> pa.Array:
    source = array.type
    if not _is_string(source):
        raise ValueConversionError(f"a {source} cannot go into a boolean column")
    lowered = pc.utf8_lower(array)
    if rules.strict:
        _refuse_where(array, _not_in(lowered, ["true", "false"]), "neither true nor false")
    return pc.equal(lowered, "true")


def _to_string(array: pa.Array) -> pa.Array:
    source = array.type
    if pa.types.is_floating(source):
        # Java prints a double as Double.toString does: 1.0, 1.0E10, 1.0E-5.
        single = source == pa.float32()
        return pa.array([None if v is None else java_double(v, single) for v in array.to_pylist()], pa.string())
    if pa.types.is_boolean(source) or pa.types.is_integer(source) or pa.types.is_decimal(source):
        return pc.cast(array, pa.string())
    if pa.types.is_struct(source) or pa.types.is_list(source) or pa.types.is_large_list(source) \
            or pa.types.is_map(source):
        return pa.array([None if v is None else json.dumps(_jsonable(v), separators=(",", ":"), ensure_ascii=False)
                         for v in array.to_pylist()], pa.string())
    return _cast(array, pa.string())


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        # A map's entries come as (key, value) pairs: an object, as Jackson writes a Map.
        if value and all(isinstance(v, tuple) and len(v) == 2 for v in value):
            return {str(k): _jsonable(v) for k, v in value}
        return [_jsonable(v) for v in value]
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return value


def _to_uuid(array: pa.Array, target: pa.DataType) -> pa.Array:
    if pa.types.is_binary(array.type) or pa.types.is_fixed_size_binary(array.type):
        return _cast(array, target)
    if not _is_string(array.type):
        raise ValueConversionError(f"a {array.type} cannot go into a uuid column")
    _check_matches(array, _UUID, "not a UUID")
    return _cast(pc.utf8_lower(array), target)


def _to_fixed(array: pa.Array, target: pa.DataType, length: int) -> pa.Array:
    data = _to_binary(array, pa.binary())
    wrong = pc.fill_null(pc.not_equal(pc.binary_length(data), length), False)
    _refuse_where(array, wrong.to_numpy(zero_copy_only=False), f"not {length} bytes for a fixed[{length}] column")
    return _cast(data, target)


def _to_binary(array: pa.Array, target: pa.DataType) -> pa.Array:
    if not _is_string(array.type):
        return _cast(array, target)
    decoded: list[bytes | None] = []
    for value in array.to_pylist():
        if value is None:
            decoded.append(None)
            continue
        try:
            # Java's basic decoder: the standard alphabet, padding optional.
            decoded.append(base64.b64decode(value + "=" * (-len(value) % 4), validate=True))
        except (binascii.Error, ValueError) as exc:
            raise ValueConversionError(f"{_shown(value)} is not base64 for a binary column") from exc
    return _cast(pa.array(decoded, pa.binary()), target)


# -- dates and timestamps ------------------------------------------------------------------------
def _to_date(array: pa.Array, target: pa.DataType, rules: ConversionRules) -> pa.Array:
    source = array.type
    if _is_string(source):
        _check_matches(array, _DATE, "not a date (YYYY-MM-DD)")
        return _cast(array, target)
    if _is_number(source):
        days = _to_integer(array, pa.int32(), rules)
        return days.cast(pa.date32())
    if pa.types.is_timestamp(source):
        return _cast(pc.cast(array, pa.timestamp(source.unit)), target)
    return _cast(array, target)


def _to_timestamp(array: pa.Array, target: pa.DataType, rules: ConversionRules) -> pa.Array:
    source = array.type
    if _is_string(source):
        return _parse_timestamps(array, target)
    if _is_number(source):
        millis = _to_integer(array, pa.int64(), rules)
        try:
            micros = pc.multiply_checked(millis, 1000)
        except pa.ArrowInvalid as exc:
            raise ValueConversionError(f"milliseconds past a timestamp's range for a {target} column") from exc
        return micros.cast(pa.timestamp("us")).cast(target)
    if pa.types.is_timestamp(source):
        # The instant; a zone-less one is a UTC wall time, as Java takes a LocalDateTime at UTC.
        utc = array if source.tz is None else array.cast(pa.timestamp(source.unit))
        return _cast(utc.cast(pa.timestamp("us"), safe=False), target)
    if pa.types.is_date(source):
        return _cast(array, target)
    raise ValueConversionError(f"a {source} cannot go into a {target} column")


def _parse_timestamps(array: pa.Array, target: pa.DataType) -> pa.Array:
    try:
        # The usual column (offsets into timestamptz, none into timestamp, microseconds at most) is one that
        # Arrow's own parser reads exactly as the rules below do, at a tenth of their cost. It also reads a
        # date alone and an hour without minutes, which the rules refuse: those have no ':' as 14th byte,
        # a check an eighth as dear as the rules' pattern.
        parsed = pc.cast(array, target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        parsed = None
    if parsed is not None:
        as_bytes = array.cast(pa.large_binary() if pa.types.is_large_string(array.type) else pa.binary())
        _refuse_unless(array, pc.equal(pc.binary_slice(as_bytes, 13, 14), b":"), _NOT_A_TIMESTAMP)
        return parsed
    _check_matches(array, _TIMESTAMP_SHAPE, _NOT_A_TIMESTAMP)
    parts = pc.extract_regex(array, _TIMESTAMP)
    seconds = parts.field("s")
    seconds = pc.if_else(pc.equal(seconds, ""), "00", seconds)
    fraction = pc.utf8_slice_codeunits(pc.binary_join_element_wise(parts.field("f"), "000000", ""), 0, 6)
    local = pc.binary_join_element_wise(parts.field("d"), "T", parts.field("hm"), ":", seconds, ".", fraction, "")
    # A null value's children hold empty strings, not nulls: the struct's validity says which are rows.
    naive = _cast(pc.if_else(pc.is_valid(parts), local, pa.scalar(None, pa.string())), pa.timestamp("us"))
    if target.tz is None:
        return naive  # an offset is dropped: the local time is kept
    instants = pc.subtract(naive.cast(pa.int64()), _offset_micros(parts.field("z")))
    return instants.cast(pa.timestamp("us")).cast(target)


def _offset_micros(zone: pa.Array) -> pa.Array:
    """``Z``, ``+HH``, ``+HHMM`` or ``+HH:MM`` (or none) as microseconds east of UTC."""
    digits = pc.replace_substring(pc.replace_substring(zone, ":", ""), "Z", "")
    sign = pc.if_else(pc.starts_with(digits, "-"), -1, 1)
    hours = _cast(pc.if_else(pc.equal(digits, ""), "0", pc.utf8_slice_codeunits(digits, 1, 3)), pa.int64())
    minutes_text = pc.utf8_slice_codeunits(digits, 3, 5)
    minutes = _cast(pc.if_else(pc.equal(minutes_text, ""), "0", minutes_text), pa.int64())
    seconds = pc.add(pc.multiply(hours, 3600), pc.multiply(minutes, 60))
    return pc.fill_null(pc.multiply(pc.multiply(seconds, sign), 1_000_000), 0)


# -- helpers -------------------------------------------------------------------------------------
def _is_string(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def _is_number(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)


def _cast(array: pa.Array, target: pa.DataType, safe: bool = True) -> pa.Array:
    try:
        return pc.cast(array, target, safe=safe)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise ValueConversionError(f"a {array.type} value cannot go into a {target} column: {exc}") from exc


def _check_matches(strings: pa.Array, pattern: str, why: str) -> None:
    _refuse_unless(strings, pc.match_substring_regex(strings, pattern), why)


def _refuse_unless(array: pa.Array, good: pa.Array, why: str) -> None:
    """Refuse the first value that is not null and not ``good``."""
    _refuse_where(array, pc.and_(pc.is_valid(array), pc.invert(good)).to_numpy(zero_copy_only=False), why)


def _check_java_double(strings: pa.Array, target: pa.DataType) -> None:
    _check_matches(strings, _JAVA_DOUBLE.pattern, f"not a number for a {target} column")


def _check_range(array: pa.Array, low: int, high: int, target: pa.DataType) -> None:
    wide = array if pa.types.is_decimal(array.type) else array.cast(pa.decimal128(38, 0))
    lowest, highest = pa.scalar(Decimal(low), wide.type), pa.scalar(Decimal(high), wide.type)
    out = pc.fill_null(pc.or_(pc.less(wide, lowest), pc.greater(wide, highest)), False)
    _refuse_where(array, out.to_numpy(zero_copy_only=False), f"out of a {target} column's range")


def _not_equal(a: pa.Array, b: pa.Array) -> np.ndarray:
    return np.asarray(pc.fill_null(pc.not_equal(a, b), False).to_numpy(zero_copy_only=False), dtype=bool)


def _not_in(strings: pa.Array, allowed: list[str]) -> np.ndarray:
    inside = pc.fill_null(pc.is_in(strings, pa.array(allowed)), True)
    return ~np.asarray(inside.to_numpy(zero_copy_only=False), dtype=bool)


def _refuse_where(array: pa.Array, bad: np.ndarray, why: str) -> None:
    bad = np.asarray(bad, dtype=bool)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise ValueConversionError(f"{_shown(array[first].as_py())}: {why}")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
