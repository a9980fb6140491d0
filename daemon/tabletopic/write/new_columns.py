"""The type of a new column for a field that came without a schema.

A record without a schema (JSON with ``schemas.enable=false``) carries strings, numbers, booleans,
objects and arrays, and a new column, on auto-create or by schema evolution, takes the field's type.
One exception: a string field whose every value is an ISO-8601 timestamp
(``YYYY-MM-DD[T ]HH:MM[:SS[.fraction]]``) becomes a timestamp column: ``timestamptz`` when a value
carries an offset or ``Z``, ``timestamp`` when none does. The Java sink makes a string column of
it; a column of timestamps is what readers and a ``day(ts)`` partition need. Either way each value
goes in by its column's rules (:mod:`tabletopic.write.column_conversion`).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

_STAMP = r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}(:?\d{2})?)?$"
_ZONE = r"(Z|[+-]\d{2}(:?\d{2})?)$"
ZONED, LOCAL = pa.timestamp("us", tz="UTC"), pa.timestamp("us")


def new_column_types(rows: pa.Table) -> pa.Schema:
    """``rows``' schema, with the timestamp strings' fields typed as the columns they would become."""
    return pa.schema([field.with_type(_column_type(rows.column(i).combine_chunks(), field.type))
                      for i, field in enumerate(rows.schema)])


def _column_type(values: pa.Array, kind: pa.DataType) -> pa.DataType:
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        present = pc.drop_null(values)
        if not len(present) or not pc.all(pc.match_substring_regex(present, _STAMP)).as_py():
            return kind
        return ZONED if pc.any(pc.match_substring_regex(present, _ZONE)).as_py() else LOCAL
    if pa.types.is_struct(kind):
        return pa.struct([kind.field(i).with_type(_column_type(pc.struct_field(values, [i]), kind.field(i).type))
                          for i in range(kind.num_fields)])
    return kind
