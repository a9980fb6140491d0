"""``org.apache.kafka.connect.transforms.HoistField$Key`` and ``$Value``: the whole side wrapped in a struct of
one field.

As Connect's, a null side is wrapped too: a tombstone's value becomes ``{field: null}``, a value no longer
null, and a record without a key gets the key ``{field: null}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import pyarrow as pa

from tabletopic.convert.records import SinkRecords
from tabletopic_plugins.transforms.connect_record import (
    KEY,
    Sided,
    is_primitive,
    operand,
    required,
    struct_from,
    with_operand,
)


class HoistField(Sided):
    keys = frozenset(("field",))
    takes_tombstones = True

    def configure(self, props: Mapping[str, str]) -> None:
        self.field = required(props, "field")

    def apply(self, records: SinkRecords) -> SinkRecords:
        table = operand(records, self.side)
        if table is None:
            # Null has no schema: Connect makes a schemaless map of it.
            wrapped = pa.table({self.field: pa.nulls(len(records))})
            if self.side == KEY:
                return with_operand(records, KEY, wrapped, False)
            return replace(records.as_values(wrapped), schemaless=True)
        column = table.column(0) if is_primitive(records, self.side) else struct_from(table)
        return with_operand(records, self.side, pa.table({self.field: column}), False)


class HoistFieldKey(HoistField):
    side = KEY


class HoistFieldValue(HoistField):
    pass
