"""Reshape Arrow rows to a table's schema: column order, names, types and missing columns.

Rows are conformed when they are routed to a table, not when they are written,
so a record that cannot fit the table fails alone (and ``errors.tolerance``
decides what happens to it) instead of failing a whole write later. A value of
another type than its column's is converted by the Iceberg sink's rules
(:mod:`tabletopic.write.column_conversion`).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from tabletopic.convert.nested_arrays import list_with, struct_with
from tabletopic.write.column_conversion import (
    JAVA_RULES,
    ConversionRules,
    ValueConversionError,
    convert,
    iceberg_type_of,
)


class ConformError(ValueError):
    """Rows that cannot take the table's shape; the message names the column and both types."""


def conform(rows: pa.Table, target: pa.Schema, table: str, case_insensitive: bool = False,
            rules: ConversionRules = JAVA_RULES) -> pa.Table:
    by_name = {name: i for i, name in enumerate(rows.column_names)}
    if case_insensitive:
        by_name.update({name.lower(): i for i, name in enumerate(rows.column_names)})
    columns = []
    for target_field in target:
        index = by_name.get(target_field.name)
        if index is None and case_insensitive:
            index = by_name.get(target_field.name.lower())
        if index is None:
            if not target_field.nullable:
                raise ConformError(f"table {table}: required column {target_field.name!r} is missing from the record")
            columns.append(pa.nulls(rows.num_rows, target_field.type))
            continue
        column = rows.column(index).combine_chunks() if rows.num_rows else pa.array([], rows.schema[index].type)
        columns.append(_conform_array(column, target_field, f"{table}.{target_field.name}", case_insensitive, rules))
    return pa.Table.from_arrays(columns, schema=target)


def _conform_array(array: pa.Array, target: pa.Field, path: str, case_insensitive: bool,
                   rules: ConversionRules) -> pa.Array:
    want = target.type
    if not target.nullable and array.null_count:
        raise ConformError(f"column {path} is required but the record has null")
    iceberg_type = iceberg_type_of(target)
    if array.type == want and iceberg_type is None:
        return array
    if pa.types.is_null(array.type):
        return pa.nulls(len(array), want)
    if pa.types.is_struct(want) and pa.types.is_struct(array.type):
        names = [array.type.field(i).name for i in range(array.type.num_fields)]
        lookup = {n.lower() if case_insensitive else n: i for i, n in enumerate(names)}
        children = []
        for child in want:
            i = lookup.get(child.name.lower() if case_insensitive else child.name)
            if i is None:
                children.append(pa.nulls(len(array), child.type))
            else:
                children.append(_conform_array(array.field(i), child, f"{path}.{child.name}", case_insensitive,
                                               rules))
        return struct_with(array, children, want)
    if pa.types.is_list(want) and (pa.types.is_list(array.type) or pa.types.is_large_list(array.type)):
        values = _conform_array(array.flatten(), want.value_field, f"{path}[]", case_insensitive, rules)
        return list_with(array, values, want)
    if pa.types.is_nested(want):
        try:
            return pc.cast(array, want, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            raise ConformError(f"column {path} is {want} in the table but the record has {array.type}: {exc}") \
                from exc
    try:
        return convert(array, want, rules, iceberg_type)
    except ValueConversionError as exc:
        raise ConformError(f"column {path} is {iceberg_type or want} in the table and {array.type} in the record: "
                           f"{exc}") from exc

