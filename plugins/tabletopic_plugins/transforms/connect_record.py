"""What Connect's single message transforms see of a record, over a batch: its key or value, and their settings.

A Connect transform has a ``$Key`` and a ``$Value`` variant that work the same way on one side of the
record. A side is a struct (its fields are the batch's columns) or a primitive (one column, ``value``),
or null (a tombstone's value; a record without a key). A batch converted without a schema stands for
Connect's schemaless values (maps); a transform that treats the two differently looks at
``records.schemaless``. Connect's configuration values are strings; the helpers here read them as
Connect's ``ConfigDef`` types read them.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa

from tabletopic.convert.records import SinkRecords, no_columns
from tabletopic.transform.chain import RowsFailed, every_record

KEY, VALUE = "key", "value"
PRIMITIVE_COLUMN = "value"  # the one column a primitive is held in
REPLACE_NULL_WITH_DEFAULT = "replace.null.with.default"


def operand(records: SinkRecords, side: str) -> pa.Table | None:
    """The side of ``records`` a transform works on; None when it is null for the whole batch."""
    if side == VALUE:
        return None if records.tombstone else records.value
    if records.key is None or not records.key.num_columns:
        return None
    return records.key


def is_primitive(records: SinkRecords, side: str) -> bool:
    return records.primitive if side == VALUE else records.key_primitive


def with_operand(records: SinkRecords, side: str, table: pa.Table, primitive: bool) -> SinkRecords:
    if side == VALUE:
        return records.with_value(table, primitive)
    return records.with_key(table, primitive)


def null_operand(records: SinkRecords, side: str) -> SinkRecords:
    """``records`` with the side null: tombstones, or records without a key."""
    if side == VALUE:
        return records.as_tombstones()
    return records.with_key(no_columns(len(records)), False)


def split_nulls(records: SinkRecords, side: str, table: pa.Table, primitive: bool,
                null: np.ndarray) -> list[SinkRecords]:
    """``records`` with the side ``table``, except where ``null``: there the side is null (a record whose
    value a transform made null is a tombstone from then on)."""
    if not null.any():
        return [with_operand(records, side, table, primitive)]
    if null.all():
        return [null_operand(records, side)]
    keep = pa.array(~null)
    return [with_operand(records.take(~null), side, table.filter(keep), primitive),
            null_operand(records.take(null), side)]


def type_name(records: SinkRecords, side: str) -> str:
    """How Connect's messages name what a side holds."""
    table = operand(records, side)
    if table is None:
        return "null"
    if is_primitive(records, side):
        return java_class(table.column(0).type)
    return "java.util.HashMap" if records.schemaless else "org.apache.kafka.connect.data.Struct"


def java_class(arrow: pa.DataType) -> str:
    if pa.types.is_string(arrow) or pa.types.is_large_string(arrow):
        return "java.lang.String"
    if pa.types.is_boolean(arrow):
        return "java.lang.Boolean"
    if pa.types.is_integer(arrow):
        return {8: "java.lang.Byte", 16: "java.lang.Short", 32: "java.lang.Integer"}.get(arrow.bit_width,
                                                                                        "java.lang.Long")
    if pa.types.is_float32(arrow):
        return "java.lang.Float"
    if pa.types.is_floating(arrow):
        return "java.lang.Double"
    if pa.types.is_decimal(arrow):
        return "java.math.BigDecimal"
    if pa.types.is_temporal(arrow):
        return "java.util.Date"
    if pa.types.is_binary(arrow) or pa.types.is_large_binary(arrow) or pa.types.is_fixed_size_binary(arrow):
        return "[B"
    if pa.types.is_list(arrow) or pa.types.is_large_list(arrow):
        return "java.util.ArrayList"
    if pa.types.is_map(arrow):
        return "java.util.HashMap"
    return "org.apache.kafka.connect.data.Struct"


def struct_operand(records: SinkRecords, side: str, purpose: str) -> pa.Table:
    """The side as a struct's fields; every record fails where it is not one (null, or a primitive), with
    Connect's ``requireStruct``/``requireMap`` message."""
    table = operand(records, side)
    if table is None or is_primitive(records, side):
        raise every_record(records, required_struct(records, side, purpose))
    return table


def required_struct(records: SinkRecords, side: str, purpose: str) -> str:
    found = type_name(records, side)
    if records.schemaless or operand(records, side) is None:
        return f"Only Map objects supported in absence of schema for [{purpose}], found: {found}"
    return f"Only Struct objects supported for [{purpose}], found: {found}"


def fail_rows(mask: np.ndarray, reason: str) -> RowsFailed:
    return RowsFailed(mask, reason)


def struct_from(table: pa.Table) -> pa.StructArray:
    """A table's rows as one struct column (a Connect struct or map nested in a new record)."""
    if not table.num_columns:
        return pa.array([{}] * table.num_rows, pa.struct([]))
    return pa.StructArray.from_arrays([c.combine_chunks() for c in table.columns], fields=list(table.schema))


def table_of_struct(column: pa.Array | pa.ChunkedArray) -> pa.Table:
    """A struct column's fields as a table's columns; a null struct's fields are null."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    assert isinstance(array, pa.StructArray)
    fields = [array.type.field(i) for i in range(array.type.num_fields)]
    return pa.Table.from_arrays(array.flatten(), schema=pa.schema(fields))


def primitive_table(column: pa.Array | pa.ChunkedArray) -> pa.Table:
    return pa.table({PRIMITIVE_COLUMN: column})


def constant(value: object, n: int, arrow: pa.DataType) -> pa.Array:
    return pa.array(np.full(n, value, dtype=object) if n else [], arrow)


def nulls(records: SinkRecords) -> np.ndarray:
    """The all-false mask of a batch."""
    return np.zeros(len(records), dtype=bool)


class Sided:
    """The ``$Key``/``$Value`` choice of a Connect transform: subclasses set ``side``."""

    side = VALUE

    @property
    def needs_key(self) -> bool:
        return self.side == KEY

    @property
    def takes_tombstones(self) -> bool:
        # A tombstone's key can be transformed; its value is null, which Connect's transforms return as it is.
        return self.side == KEY


# -- settings, as Connect's ConfigDef reads them ----------------------------------------------------
def text(props: Mapping[str, str], name: str, default: str | None = None) -> str | None:
    value = props.get(name)
    return default if value is None else value


def required(props: Mapping[str, str], name: str) -> str:
    value = props.get(name)
    if value is None:
        raise ValueError(f'Missing required configuration "{name}" which has no default value.')
    return value


def flag(props: Mapping[str, str], name: str, default: bool) -> bool:
    value = props.get(name)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"Invalid value {value} for configuration {name}: Expected value to be either true or false")
    return lowered == "true"


def integer(props: Mapping[str, str], name: str) -> int | None:
    value = props.get(name)
    if value is None or value.strip() == "":
        return None
    try:
        return int(value.strip())
    except ValueError:
        raise ValueError(f"Invalid value {value} for configuration {name}: Not a number of type INT") from None


def items(props: Mapping[str, str], name: str) -> list[str]:
    """A Connect LIST: comma-separated, each item trimmed; an empty value is the empty list."""
    value = props.get(name)
    if value is None or not value.strip():
        return []
    return [item.strip() for item in value.split(",")]


def required_items(props: Mapping[str, str], name: str) -> list[str]:
    found = items(props, name)
    if name not in props:
        raise ValueError(f'Missing required configuration "{name}" which has no default value.')
    if not found:
        raise ValueError(f"Invalid value {props.get(name)!r} for configuration {name}: Empty list")
    return found


def one_of(props: Mapping[str, str], name: str, choices: tuple[str, ...], default: str | None) -> str:
    value = props.get(name, default)
    if value is None:
        raise ValueError(f'Missing required configuration "{name}" which has no default value.')
    if value not in choices:
        raise ValueError(f"Invalid value {value} for configuration {name}: String must be one of: "
                         f"{', '.join(choices)}")
    return value


def java_split(value: str, separator: str) -> list[str]:
    """``String.split`` with a literal separator: trailing empty strings are dropped."""
    parts = value.split(separator)
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    if parts == [""] and value:
        return []
    return parts


def replace_null_with_default(props: Mapping[str, str]) -> bool:
    """Connect's ``replace.null.with.default``: read and checked; the converters here carry no field defaults,
    so a null stays null either way."""
    return flag(props, REPLACE_NULL_WITH_DEFAULT, True)
