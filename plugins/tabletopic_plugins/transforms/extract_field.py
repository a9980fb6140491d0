"""``org.apache.kafka.connect.transforms.ExtractField$Key`` and ``$Value``: one field becomes the whole side.

As Connect's: a null side passes unchanged; a struct's field that is not in its schema is an error, a
schemaless value without the field becomes null. A record whose extracted value is null has a null value
from then on: a tombstone. ``field.syntax.version=V2`` reads ``field`` as a dotted path into nested
structs, with backticks around a name that holds a dot (KIP-821); ``V1``, the default, reads it as one
name.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tabletopic.convert.records import SinkRecords
from tabletopic.transform.chain import every_record
from tabletopic_plugins.transforms.connect_record import (
    KEY,
    REPLACE_NULL_WITH_DEFAULT,
    Sided,
    is_primitive,
    null_operand,
    operand,
    primitive_table,
    replace_null_with_default,
    required,
    required_struct,
    split_nulls,
    table_of_struct,
    text,
)

FIELD_SYNTAX_VERSION = "field.syntax.version"


def field_path(path: str, version: str) -> list[str]:
    """The steps of ``path``: V1 one step; V2 dotted, with backticks around a step that holds a dot (a
    backslash before a backtick keeps it in the name)."""
    if version == "V1":
        return [path]
    steps: list[str] = []
    i, n = 0, len(path)
    while 0 <= i < n:
        if path[i] != "`":
            dot = path.find(".", i)
            steps.append(path[i:] if dot < 0 else path[i:dot])
            i = n if dot < 0 else dot + 1
            continue
        opened = i
        i += 1
        start, name = i, []
        while True:
            i = path.find("`", i)
            if i < 0:
                raise ValueError(f"Incomplete backtick pair in path: [{path}], consider adding a backslash before "
                                 f"backtick at position {opened} to escape it")
            escaped = path[i - 1] == "\\"
            if i >= n - 1:
                if escaped:
                    raise ValueError(f"Incomplete backtick pair in path: [{path}], consider adding a backslash "
                                     f"before backtick at position {opened} to escape it")
                name.append(path[start:i])
                steps.append("".join(name))
                i += 1
                break
            if path[i + 1] != ".":
                i += 1
                continue
            if escaped:
                name.append(path[start:i - 1] + "`")
                i += 1
                start = i
                continue
            name.append(path[start:i])
            steps.append("".join(name))
            i += 2
            break
    if path.endswith("."):
        steps.append("")
    return steps


def syntax_version(props: Mapping[str, str]) -> str:
    version = (text(props, FIELD_SYNTAX_VERSION, "V1") or "V1").upper()
    if version not in ("V1", "V2"):
        raise ValueError(f"Invalid value {props.get(FIELD_SYNTAX_VERSION)} for configuration "
                         f"{FIELD_SYNTAX_VERSION}: String must be one of (case insensitive): V1, V2")
    return version


def read_steps(table: pa.Table, steps: list[str]) -> pa.Array | None:
    """The column at ``steps``, nulls where a struct on the way is null; None where a step names no field."""
    if table.schema.get_field_index(steps[0]) < 0:
        return None
    column = table.column(steps[0]).combine_chunks()
    for step in steps[1:]:
        if not pa.types.is_struct(column.type) or column.type.get_field_index(step) < 0:
            return None
        column = pc.struct_field(column, step)
    return column


class ExtractField(Sided):
    keys = frozenset(("field", FIELD_SYNTAX_VERSION, REPLACE_NULL_WITH_DEFAULT))

    def configure(self, props: Mapping[str, str]) -> None:
        self.path = required(props, "field")
        self.steps = field_path(self.path, syntax_version(props))
        replace_null_with_default(props)

    def apply(self, records: SinkRecords) -> list[SinkRecords] | SinkRecords:
        table = operand(records, self.side)
        if table is None:
            return records
        if is_primitive(records, self.side):
            raise every_record(records, required_struct(records, self.side, "field extraction"))
        column = read_steps(table, self.steps)
        if column is None:
            if not records.schemaless:
                raise every_record(records, f"Unknown field: {self.path}")
            return null_operand(records, self.side)
        null = np.asarray(column.is_null().to_numpy(zero_copy_only=False), dtype=bool)
        if pa.types.is_struct(column.type):
            return split_nulls(records, self.side, table_of_struct(column), False, null)
        return split_nulls(records, self.side, primitive_table(column), True, null)


class ExtractFieldKey(ExtractField):
    side = KEY


class ExtractFieldValue(ExtractField):
    pass
