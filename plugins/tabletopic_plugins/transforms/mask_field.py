"""``org.apache.kafka.connect.transforms.MaskField$Key`` and ``$Value``: fields replaced by their type's empty
value, or by ``replacement``.

As Connect's: the empty value is false, 0, 0.0, the empty string, the epoch for a Timestamp, Date or Time,
the empty array or map; a null stays null. A struct or bytes cannot be masked, and ``replacement`` only
fits numbers and strings (it is read as the field's number type): a record whose value there cannot be
masked fails. Unlike most transforms, Connect's MaskField takes no null side: a tombstone fails it (put
a RecordIsTombstone predicate before it to pass them).
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal, InvalidOperation

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tabletopic.convert.records import SinkRecords
from tabletopic.transform.chain import RowsFailed, every_record
from tabletopic_plugins.transforms.cast_values import java_parse_double
from tabletopic_plugins.transforms.connect_record import (
    KEY,
    REPLACE_NULL_WITH_DEFAULT,
    Sided,
    is_primitive,
    java_class,
    operand,
    replace_null_with_default,
    required_items,
    required_struct,
    text,
    with_operand,
)


def _empty(arrow: pa.DataType) -> object:
    if pa.types.is_boolean(arrow):
        return False
    if pa.types.is_integer(arrow) or pa.types.is_floating(arrow) or pa.types.is_decimal(arrow):
        return 0
    if pa.types.is_string(arrow) or pa.types.is_large_string(arrow):
        return ""
    if pa.types.is_timestamp(arrow) or pa.types.is_date(arrow) or pa.types.is_time(arrow):
        return 0
    if pa.types.is_list(arrow) or pa.types.is_large_list(arrow):
        return []
    if pa.types.is_map(arrow):
        return []
    raise TypeError(f"Cannot mask value of type: class {java_class(arrow)}")


def _replacement(arrow: pa.DataType, replacement: str) -> object:
    if pa.types.is_string(arrow) or pa.types.is_large_string(arrow):
        return replacement
    if pa.types.is_integer(arrow) or pa.types.is_floating(arrow) or pa.types.is_decimal(arrow):
        try:
            number = Decimal(replacement.strip())
        except InvalidOperation:
            number = None
        if number is None or not number.is_finite():
            parsed = java_parse_double(replacement) if pa.types.is_floating(arrow) else None
            if parsed is None:
                raise ValueError(f"Unable to convert {replacement} (class java.lang.String) to number")
            return parsed
        if pa.types.is_integer(arrow):
            whole = int(number.to_integral_value(rounding="ROUND_DOWN"))
            info = np.iinfo(arrow.to_pandas_dtype())
            if not info.min <= whole <= info.max:
                raise ValueError(f"Unable to convert {replacement} (class java.lang.String) to number")
            return whole
        return float(number) if pa.types.is_floating(arrow) else number
    raise TypeError(f"Cannot mask value of type class {java_class(arrow)} with custom replacement.")


class MaskField(Sided):
    keys = frozenset(("fields", "replacement", REPLACE_NULL_WITH_DEFAULT))
    takes_tombstones = True

    def configure(self, props: Mapping[str, str]) -> None:
        self.fields = required_items(props, "fields")
        self.replacement = text(props, "replacement")
        if self.replacement is not None and not self.replacement.strip():
            raise ValueError("Invalid value for configuration replacement: String must be non-empty")
        replace_null_with_default(props)

    def apply(self, records: SinkRecords) -> SinkRecords:
        table = operand(records, self.side)
        if table is None or is_primitive(records, self.side):
            raise every_record(records, required_struct(records, self.side, "mask fields"))
        for name in self.fields:
            at = table.schema.get_field_index(name)
            if at < 0:
                continue
            column = table.column(at).combine_chunks()
            present = pc.is_valid(column)
            if pa.types.is_struct(column.type) and records.schemaless and self.replacement is None:
                # A schemaless nested object is Connect's map: masked, an empty one (a row of nulls here).
                table = table.set_column(at, name, _empty_struct(column))
                continue
            try:
                value = _empty(column.type) if self.replacement is None else _replacement(column.type, self.replacement)
            except (TypeError, ValueError) as exc:
                mask = np.asarray(present.to_numpy(zero_copy_only=False), dtype=bool)
                if mask.any():
                    raise RowsFailed(mask, str(exc)) from None
                continue
            table = table.set_column(at, name, _fill(column, value, present))
        return with_operand(records, self.side, table, False)


def _empty_struct(column: pa.Array) -> pa.Array:
    fields = [column.type.field(i) for i in range(column.type.num_fields)]
    children = [pa.nulls(len(column), f.type) for f in fields]
    return pa.StructArray.from_arrays(children, fields=fields, mask=pc.is_null(column))


def _fill(column: pa.Array, value: object, present: pa.Array) -> pa.Array:
    arrow = column.type
    if pa.types.is_struct(arrow):
        raise AssertionError("structs are refused before")
    if pa.types.is_timestamp(arrow) or pa.types.is_date(arrow) or pa.types.is_time(arrow):
        zeros = pa.array(np.zeros(len(column), dtype=np.int64), pa.int64())
        masked = zeros.cast(pa.int32()).cast(arrow) if pa.types.is_date32(arrow) else zeros.cast(arrow)
    elif pa.types.is_map(arrow) or pa.types.is_list(arrow) or pa.types.is_large_list(arrow):
        masked = pa.array([[] for _ in range(len(column))], arrow)
    else:
        masked = pa.array([value] * len(column), arrow)
    return pc.if_else(present, masked, pa.nulls(len(column), arrow))


class MaskFieldKey(MaskField):
    side = KEY


class MaskFieldValue(MaskField):
    pass
