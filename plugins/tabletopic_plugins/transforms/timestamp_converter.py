"""``org.apache.kafka.connect.transforms.TimestampConverter$Key`` and ``$Value``: a timestamp field, or the whole
side, between a Timestamp, a Date, a Time, a Unix epoch number and a formatted string.

As Connect's:

* The input's kind comes from its type: a Timestamp, Date or Time; a long is a Unix time in
  ``unix.precision`` (milliseconds by default); a string is read with ``format``. Schemaless, a long or a
  string; a double fails.
* Values keep millisecond precision: microseconds and nanoseconds are cut toward zero to milliseconds,
  and a timestamp's sub-millisecond part is dropped.
* ``target.type`` is ``string`` (with ``format``), ``unix`` (a long in ``unix.precision``), ``Date``
  (midnight UTC), ``Time`` (the time of day) or ``Timestamp``.
* ``format`` is Java's SimpleDateFormat in UTC (see simple_date_format.py); a string that does not
  match it fails the record: "Could not parse timestamp: value (...) does not match pattern (...)".
* A null stays null; a field the value does not have leaves it as it is.

A Time here is a long of microseconds of the day, as the converters make it for Iceberg (Spark has no
time type); as input, such a long is read as a Unix time, as every long is.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tabletopic.convert.records import SinkRecords
from tabletopic.transform.chain import RowsFailed, every_record
from tabletopic_plugins.transforms.cast_values import epoch_millis
from tabletopic_plugins.transforms.connect_record import (
    KEY,
    PRIMITIVE_COLUMN,
    REPLACE_NULL_WITH_DEFAULT,
    Sided,
    is_primitive,
    java_class,
    one_of,
    operand,
    replace_null_with_default,
    required_struct,
    text,
    with_operand,
)
from tabletopic_plugins.transforms.simple_date_format import DAY_MS, SimpleDateFormat

TARGET_TYPES = ("string", "unix", "Date", "Time", "Timestamp")
PRECISIONS = ("nanoseconds", "microseconds", "milliseconds", "seconds")
_LONG_MAX, _LONG_MIN = np.iinfo(np.int64).max, np.iinfo(np.int64).min
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")


class TimestampConverter(Sided):
    keys = frozenset(("field", "target.type", "format", "unix.precision", REPLACE_NULL_WITH_DEFAULT))

    def configure(self, props: Mapping[str, str]) -> None:
        self.field = text(props, "field", "") or ""
        self.target = one_of(props, "target.type", TARGET_TYPES, None)
        pattern = text(props, "format", "") or ""
        self.precision = one_of(props, "unix.precision", PRECISIONS, "milliseconds")
        replace_null_with_default(props)
        if self.target == "string" and not pattern.strip():
            raise ValueError("TimestampConverter requires format option to be specified when using string timestamps")
        self.format: SimpleDateFormat | None = None
        if pattern.strip():
            try:
                self.format = SimpleDateFormat(pattern)
            except ValueError as exc:
                raise ValueError("TimestampConverter requires a SimpleDateFormat-compatible pattern for string "
                                 f"timestamps: {pattern} ({exc})") from None

    def apply(self, records: SinkRecords) -> SinkRecords:
        table = operand(records, self.side)
        if table is None:
            return records
        if not self.field:
            if not is_primitive(records, self.side):
                raise every_record(records, "TimestampConverter does not support java.util.HashMap objects as "
                                   "timestamps" if records.schemaless else
                                   "Schema Schema{STRUCT} does not correspond to a known timestamp type format")
            column = self.convert(table.column(0).combine_chunks(), records.schemaless)
            return with_operand(records, self.side, pa.table({PRIMITIVE_COLUMN: column}), True)
        if is_primitive(records, self.side):
            raise every_record(records, required_struct(records, self.side, "converting timestamp formats"))
        at = table.schema.get_field_index(self.field)
        if at < 0:
            return records
        column = self.convert(table.column(at).combine_chunks(), records.schemaless)
        return with_operand(records, self.side, table.set_column(at, self.field, column), False)

    def convert(self, column: pa.Array, schemaless: bool) -> pa.Array:
        """A column of timestamps in ``target.type``; RowsFailed for the values that cannot be read."""
        n = len(column)
        present = np.asarray(column.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        if pa.types.is_null(column.type) or not present.any():
            return pa.nulls(n, self._target_type())
        millis = self._millis(column, present, schemaless)
        out = self._to_target(millis)
        return pc.if_else(pa.array(present), out, pa.nulls(n, out.type)) if not present.all() else out

    def _millis(self, column: pa.Array, present: np.ndarray, schemaless: bool) -> np.ndarray:
        arrow = column.type
        if pa.types.is_temporal(arrow):
            return epoch_millis(column)
        if pa.types.is_int64(arrow):
            raw = np.asarray(pc.fill_null(column, 0).to_numpy(), dtype=np.int64)
            if self.precision == "seconds":
                return _saturating_multiply(raw, 1000)
            if self.precision == "microseconds":
                return _truncating_divide(raw, 1000)
            if self.precision == "nanoseconds":
                return _truncating_divide(raw, 1_000_000)
            return raw
        if pa.types.is_string(arrow) or pa.types.is_large_string(arrow):
            if self.format is None:
                raise RowsFailed(present, "TimestampConverter needs format to read string timestamps")
            millis, read = self.format.parse(column.cast(pa.string()))
            bad = present & ~read
            if bad.any():
                texts = column.filter(pa.array(bad)).to_pylist()
                raise RowsFailed(bad, [f"Could not parse timestamp: value ({t}) does not match pattern "
                                       f"({self.format.pattern})" for t in texts])
            return millis
        if schemaless:
            raise RowsFailed(present, f"TimestampConverter does not support class {java_class(arrow)} objects as "
                                      "timestamps")
        raise RowsFailed(present, f"Schema Schema{{{str(arrow).upper()}}} does not correspond to a known timestamp "
                                  "type format")

    def _to_target(self, millis: np.ndarray) -> pa.Array:
        if self.target == "string":
            assert self.format is not None
            return self.format.format(millis)
        if self.target == "unix":
            if self.precision == "seconds":
                return pa.array(_truncating_divide(millis, 1000), pa.int64())
            if self.precision == "microseconds":
                return pa.array(_saturating_multiply(millis, 1000), pa.int64())
            if self.precision == "nanoseconds":
                return pa.array(_saturating_multiply(millis, 1_000_000), pa.int64())
            return pa.array(millis, pa.int64())
        if self.target == "Date":
            return pa.array(np.floor_divide(millis, DAY_MS).astype(np.int32), pa.int32()).cast(pa.date32())
        if self.target == "Time":
            return pa.array((millis % DAY_MS) * 1000, pa.int64())
        return pa.array(millis, pa.int64()).cast(pa.timestamp("ms", tz="UTC")).cast(TIMESTAMP_TYPE)

    def _target_type(self) -> pa.DataType:
        return {"string": pa.string(), "unix": pa.int64(), "Date": pa.date32(), "Time": pa.int64()}.get(
            self.target, TIMESTAMP_TYPE)


def _truncating_divide(values: np.ndarray, by: int) -> np.ndarray:
    """Java's ``TimeUnit`` down-conversion: division cut toward zero."""
    quotient = np.abs(values) // by
    return np.where(values < 0, -quotient, quotient)


def _saturating_multiply(values: np.ndarray, by: int) -> np.ndarray:
    """Java's ``TimeUnit`` up-conversion: saturates at Long.MAX_VALUE and Long.MIN_VALUE."""
    limit = _LONG_MAX // by
    out = values * by
    return np.where(values > limit, _LONG_MAX, np.where(values < -limit, _LONG_MIN, out))


class TimestampConverterKey(TimestampConverter):
    side = KEY


class TimestampConverterValue(TimestampConverter):
    pass
