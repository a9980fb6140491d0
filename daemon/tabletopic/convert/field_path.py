"""Read a dotted field path (``after.id``, ``_cdc.op``) from Arrow rows, as routing and CDC need."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc


def read_path(table: pa.Table, path: list[str], case_insensitive: bool) -> pa.Array | None:
    """The column at ``path`` (into structs), or None if any step is missing."""
    names = table.column_names
    head = _match(path[0], names, case_insensitive)
    if head is None:
        return None
    column: pa.Array = table.column(head).combine_chunks()
    for part in path[1:]:
        if not pa.types.is_struct(column.type):
            return None
        child = _match(part, [column.type.field(i).name for i in range(column.type.num_fields)], case_insensitive)
        if child is None:
            return None
        column = pc.struct_field(column, child)
    return column


def _match(name: str, names: list[str], case_insensitive: bool) -> str | None:
    if name in names:
        return name
    if case_insensitive:
        return next((n for n in names if n.lower() == name.lower()), None)
    return None
