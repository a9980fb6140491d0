"""``org.apache.kafka.connect.transforms.Flatten$Key`` and ``$Value``: nested structs become top-level fields
named ``parent<delimiter>child``.

As Connect's: arrays stay as they are; a null side passes unchanged; a null struct's fields are null.
With a schema a map field is refused (Connect's Flatten takes none), and two fields flattened to one
name are refused; schemaless, a nested object is flattened like a struct and the later of two such
fields stays.
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa
import pyarrow.compute as pc

from tabletopic.convert.records import SinkRecords
from tabletopic.transform.chain import every_record
from tabletopic_plugins.transforms.connect_record import (
    KEY,
    Sided,
    is_primitive,
    operand,
    required_struct,
    text,
    with_operand,
)


class Flatten(Sided):
    keys = frozenset(("delimiter",))

    def configure(self, props: Mapping[str, str]) -> None:
        self.delimiter = text(props, "delimiter", ".") or ""

    def apply(self, records: SinkRecords) -> SinkRecords:
        table = operand(records, self.side)
        if table is None:
            return records
        if is_primitive(records, self.side):
            raise every_record(records, required_struct(records, self.side, "flattening"))
        names: list[str] = []
        columns: list[pa.Array] = []
        for name, column in zip(table.column_names, table.columns, strict=True):
            reason = self._flatten(name, column.combine_chunks(), records.schemaless, names, columns)
            if reason:
                raise every_record(records, reason)
        if len(set(names)) != len(names):
            twice = next(n for n in names if names.count(n) > 1)
            if not records.schemaless:
                raise every_record(records, f"Cannot create field because of field name duplication {twice}")
            last = {n: i for i, n in enumerate(names)}
            names, columns = list(last), [columns[i] for i in last.values()]
        return with_operand(records, self.side, pa.Table.from_arrays(columns, names=names), False)

    def _flatten(self, name: str, column: pa.Array, schemaless: bool, names: list[str],
                 columns: list[pa.Array]) -> str | None:
        if pa.types.is_struct(column.type):
            for i in range(column.type.num_fields):
                child = column.type.field(i)
                reason = self._flatten(f"{name}{self.delimiter}{child.name}", pc.struct_field(column, [i]),
                                       schemaless, names, columns)
                if reason:
                    return reason
            return None
        if pa.types.is_map(column.type) and not schemaless:
            return f"Flatten transformation does not support MAP for record with schemas (for field {name})."
        names.append(name)
        columns.append(column)
        return None


class FlattenKey(Flatten):
    side = KEY


class FlattenValue(Flatten):
    pass
