"""``org.apache.kafka.connect.transforms.Cast$Key`` and ``$Value``: fields, or the whole side, to another
primitive type.

``spec`` is ``field:type,...`` or one ``type`` for the whole side (then alone); the types are int8,
int16, int32, int64, float32, float64, boolean and string. What each value becomes is in cast_values.py.
A null side passes unchanged; a field a schemaless value does not have stays absent.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa

from tabletopic.convert.records import SinkRecords
from tabletopic.transform.chain import RowsFailed, every_record
from tabletopic_plugins.transforms.cast_values import TARGETS, CastFailed, cast_column
from tabletopic_plugins.transforms.connect_record import (
    KEY,
    PRIMITIVE_COLUMN,
    REPLACE_NULL_WITH_DEFAULT,
    Sided,
    is_primitive,
    java_split,
    operand,
    replace_null_with_default,
    required_items,
    required_struct,
    with_operand,
)

WHOLE = ""  # the spec's key for a cast of the whole side


def parse_spec(mappings: list[str]) -> dict[str, str]:
    casts: dict[str, str] = {}
    for mapping in mappings:
        parts = java_split(mapping, ":")
        if len(parts) > 2:
            raise ValueError(f"Invalid value {mappings} for configuration spec: Invalid rename mapping: {mapping}")
        named = parts[-1].strip().lower() if parts else ""
        if named not in TARGETS:
            if named.upper() in ("BYTES", "ARRAY", "MAP", "STRUCT"):
                raise ValueError(f"Cast transformation does not support casting to {named.upper()}; supported types "
                                 "are [INT8, INT16, INT32, INT64, FLOAT32, FLOAT64, BOOLEAN, STRING]")
            raise ValueError(f"Invalid type found in casting spec: {parts[-1].strip() if parts else ''}")
        casts[WHOLE if len(parts) == 1 else parts[0].strip()] = named
    if WHOLE in casts and len(mappings) > 1:
        raise ValueError("Cast transformations that specify a type to cast the entire value to may only specify a "
                         "single cast in their spec")
    return casts


class Cast(Sided):
    keys = frozenset(("spec", REPLACE_NULL_WITH_DEFAULT))

    def configure(self, props: Mapping[str, str]) -> None:
        if not props.get("spec", "").strip():
            raise ValueError("spec: Must specify at least one field to cast.")
        self.casts = parse_spec(required_items(props, "spec"))
        replace_null_with_default(props)

    def apply(self, records: SinkRecords) -> SinkRecords:
        table = operand(records, self.side)
        if table is None:
            return records
        whole = self.casts.get(WHOLE)
        if whole is not None:
            if not is_primitive(records, self.side):
                kind = "MAP" if records.schemaless else "STRUCT"
                raise every_record(records, f"Cast transformation does not support casting from {kind}; "
                                            "supported types are [INT8, INT16, INT32, INT64, FLOAT32, FLOAT64, "
                                            "BOOLEAN, STRING, BYTES]")
            column = self._cast(table.column(0).combine_chunks(), whole)
            return with_operand(records, self.side, pa.table({PRIMITIVE_COLUMN: column}), True)
        if is_primitive(records, self.side):
            raise every_record(records, required_struct(records, self.side, "cast types"))
        for name, target in self.casts.items():
            at = table.schema.get_field_index(name)
            if at >= 0:
                table = table.set_column(at, name, self._cast(table.column(at).combine_chunks(), target))
        return with_operand(records, self.side, table, False)

    @staticmethod
    def _cast(column: pa.Array, target: str) -> pa.Array:
        try:
            return cast_column(column, target)
        except CastFailed as exc:
            raise RowsFailed(np.asarray(exc.mask, dtype=bool), exc.reasons) from None


class CastKey(Cast):
    side = KEY


class CastValue(Cast):
    pass
