"""Evolve a table's schema to take records with new fields or wider types, in place.

With ``iceberg.tables.evolve-schema-enabled`` a record may bring:

* new fields of any type (primitives, structs, lists, maps), at the top level or inside
  structs (also structs inside lists): added as optional columns, so rows written before
  read them as null;
* wider types: int to long, float to double, a decimal of higher precision (same scale);
* an optional field where the table has a required column: the column becomes optional,
  unless it is an id column of an upsert or CDC table. Iceberg keeps identifier fields
  required, and a record whose key is null fails on its own instead.

Records without a schema (JSON with ``schemas.enable=false``) add fields only, as the Java sink
does for a map: their types are what JSON happened to hold, so a column keeps its type and each
value is converted to it (:mod:`tabletopic.write.column_conversion`).

Each is a metadata-only change (``UpdateSchema``); no data file is rewritten.  A field whose
values no conversion takes into the column (a boolean into a long column) is an
:class:`EvolutionError` naming the table, the field and both types.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.pandas.types import from_arrow_type

from tabletopic.write.column_conversion import converts, iceberg_type_of


class EvolutionError(ValueError):
    pass


@dataclass(frozen=True)
class Change:
    kind: str  # add, widen, optional
    path: tuple[str, ...]
    type: pa.DataType | None = None

    def __str__(self) -> str:
        return f"{self.kind} {'.'.join(self.path)}" + (f" {self.type}" if self.type is not None else "")


_NUMERIC_RANK = {pa.int8(): 1, pa.int16(): 2, pa.int32(): 3, pa.int64(): 4}
_FLOAT_RANK = {pa.float16(): 1, pa.float32(): 2, pa.float64(): 3}


def plan(table_schema: pa.Schema, record_schema: pa.Schema, table: str,
         case_insensitive: bool = False, identifiers: Collection[str] = (), schemaless: bool = False) -> list[Change]:
    """The changes that let ``record_schema`` rows into a table of ``table_schema``; the
    ``identifiers`` (its id columns) stay required. ``schemaless`` records only add fields."""
    changes: list[Change] = []
    _struct(list(table_schema), list(record_schema), (), table, case_insensitive, changes, top_level=True,
            required=set(identifiers), schemaless=schemaless)
    return changes


def _struct(table_fields: list[pa.Field], record_fields: list[pa.Field], path: tuple[str, ...], table: str,
            case_insensitive: bool, changes: list[Change], top_level: bool, required: Collection[str] = (),
            schemaless: bool = False) -> None:
    by_name = {f.name.lower() if case_insensitive else f.name: f for f in table_fields}
    for field in record_fields:
        if pa.types.is_null(field.type):
            continue  # no type known yet: nothing to add
        existing = by_name.get(field.name.lower() if case_insensitive else field.name)
        if existing is None:
            changes.append(Change("add", (*path, field.name), field.type))
            continue
        here = (*path, existing.name)
        if top_level and field.nullable and not existing.nullable and existing.name not in required \
                and not schemaless:
            changes.append(Change("optional", here))
        _field(existing, field.type, here, table, case_insensitive, changes, schemaless)


def _field(existing: pa.Field, want: pa.DataType, path: tuple[str, ...], table: str, case_insensitive: bool,
           changes: list[Change], schemaless: bool) -> None:
    have = existing.type
    if have == want:
        return
    if pa.types.is_struct(have) and pa.types.is_struct(want):
        _struct(list(have), list(want), path, table, case_insensitive, changes, top_level=False,
                schemaless=schemaless)
        return
    if pa.types.is_list(have) and (pa.types.is_list(want) or pa.types.is_large_list(want)):
        _field(have.value_field, want.value_type, (*path, "element"), table, case_insensitive, changes, schemaless)
        return
    widened = None if schemaless else _widen(have, want)
    if widened is not None:
        if widened != have:
            changes.append(Change("widen", path, widened))
        return
    if converts(want, have, iceberg_type_of(existing)):
        return
    raise EvolutionError(f"table {table}: field {'.'.join(path)} is {have} in the table but {want} in the record, "
                         "which neither evolves (new fields, int to long, float to double and higher decimal "
                         "precision do) nor converts (docs/tables.md lists the conversions)")


def _widen(have: pa.DataType, want: pa.DataType) -> pa.DataType | None:
    """The type the column should have (``have`` if it is wide enough), or None if not comparable."""
    if have in _NUMERIC_RANK and want in _NUMERIC_RANK:
        return pa.int64() if _NUMERIC_RANK[want] > _NUMERIC_RANK[have] and have != pa.int64() else have
    if have in _FLOAT_RANK and want in _FLOAT_RANK:
        return pa.float64() if _FLOAT_RANK[want] > _FLOAT_RANK[have] else have
    if pa.types.is_floating(have) and pa.types.is_integer(want):
        return have
    if pa.types.is_decimal(have) and pa.types.is_decimal(want) and have.scale == want.scale:
        return pa.decimal128(want.precision, want.scale) if want.precision > have.precision else have
    return None


def apply(jvm: Any, table: Any, changes: list[Change]) -> None:
    """Commit ``changes`` to the Java table in one schema update."""
    update = table.updateSchema()
    for change in changes:
        name = ".".join(change.path)
        if change.kind == "add":
            iceberg_type = _iceberg_type(jvm, change.type)
            if len(change.path) == 1:
                update = update.addColumn(change.path[0], iceberg_type)
            else:
                update = update.addColumn(".".join(change.path[:-1]), change.path[-1], iceberg_type)
        elif change.kind == "widen":
            update = update.updateColumn(name, _iceberg_type(jvm, change.type).asPrimitiveType())
        elif change.kind == "optional":
            update = update.makeColumnOptional(name)
    update.commit()
    table.refresh()


def _iceberg_type(jvm: Any, arrow_type: pa.DataType | None) -> Any:
    assert arrow_type is not None
    spark_type = jvm.org.apache.spark.sql.types.DataType.fromJson(from_arrow_type(arrow_type).json())
    converted = jvm.org.apache.iceberg.spark.SparkSchemaUtil.convert(spark_type)
    # py4j picks convert(StructType), which returns a Schema, for a struct: a column needs its type.
    return converted.asStruct() if converted.getClass().getSimpleName() == "Schema" else converted
