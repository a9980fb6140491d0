"""``org.apache.kafka.connect.transforms.ValueToKey``: the key becomes a struct of some of the value's fields.

As Connect's: a field a struct value does not have fails the record ("Field does not exist"); a schemaless
value without it gives a null in the key. A null value (a tombstone) fails too: Connect's ValueToKey takes
none (a RecordIsTombstone predicate with ``negate=true`` passes them by).
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa

from tabletopic.convert.records import SinkRecords
from tabletopic.transform.chain import every_record
from tabletopic_plugins.transforms.connect_record import (
    REPLACE_NULL_WITH_DEFAULT,
    VALUE,
    is_primitive,
    operand,
    replace_null_with_default,
    required_items,
    required_struct,
)


class ValueToKey:
    keys = frozenset(("fields", REPLACE_NULL_WITH_DEFAULT))
    takes_tombstones = True

    def configure(self, props: Mapping[str, str]) -> None:
        self.fields = required_items(props, "fields")
        replace_null_with_default(props)

    def apply(self, records: SinkRecords) -> SinkRecords:
        table = operand(records, VALUE)
        if table is None or is_primitive(records, VALUE):
            raise every_record(records, required_struct(records, VALUE, "copying fields from value to key"))
        columns = []
        for name in self.fields:
            at = table.schema.get_field_index(name)
            if at < 0:
                if not records.schemaless:
                    raise every_record(records, f"Field does not exist: {name}")
                columns.append(pa.nulls(len(records)))
            else:
                columns.append(table.column(at))
        return records.with_key(pa.Table.from_arrays(columns, names=self.fields), False)
