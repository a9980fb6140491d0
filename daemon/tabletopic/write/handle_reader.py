"""A Java table read into a :class:`TableHandle`: its Arrow schema, Parquet layouts and, if upserted, its keys."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from tabletopic.config.connector import TableConfig
from tabletopic.write.column_conversion import ICEBERG_TYPE
from tabletopic.write.java_errors import JAVA_ERRORS, java_error_message
from tabletopic.write.parquet_encoding import layouts
from tabletopic.write.spark_session import SparkRuntime
from tabletopic.write.table_handle import TableError, TableHandle


class HandleReader:
    """Reads a loaded or created table's current schema into what the sink writes against.

    Stateless past its settings; any thread. Each read is two or three py4j calls.
    """

    def __init__(self, spark: SparkRuntime, parquet_encoder: str, write_props: Mapping[str, str],
                 table: Callable[[str], TableConfig]) -> None:
        self._spark = spark
        self._parquet_encoder = parquet_encoder  # tabletopic.write.parquet-encoder
        self._write_props = write_props  # iceberg.tables.write-props.*, for the files Arrow writes itself
        self._table = table  # iceberg.table.<t>.*

    def read(self, name: str, java: Any) -> TableHandle:
        encoder = self._parquet_encoder
        # A cluster's executors are there to take the encoding off the daemon's host: auto leaves it to them.
        by_arrow = encoder == "arrow" or (encoder == "auto" and self._spark.local)
        current = json.loads(self._spark.java_class("tabletopic.TableShapes").currentJson(
            java, json.dumps(dict(self._write_props)) if by_arrow else None))
        arrow = _with_iceberg_types(to_arrow_schema(StructType.fromJson(json.loads(current["spark"]))),
                                    current.get("iceberg", {}))
        handle = TableHandle(name, java, arrow, int(current["schema_id"]), self._table(name).commit_branch)
        if by_arrow:
            handle.parquet, handle.delete_parquet = layouts(arrow, current["parquet"])
        if self._table(name).keyed:
            self._key(handle)
        return handle

    def _key(self, handle: TableHandle) -> None:
        """Resolve the id columns of a keyed table and the spec its equality deletes use."""
        schema = handle.java.schema()
        # Set ones win; else the table's identifier fields, as Iceberg's own writers take them.
        columns = self._table(handle.name).id_columns or [str(c) for c in schema.identifierFieldNames()]
        missing = [c for c in columns if schema.findField(c) is None]
        if not columns or missing:
            have = [c.name() for c in schema.columns()]
            why = "none are set, and the table has no identifier fields" if not columns else f"{missing} are not in it"
            raise TableError(
                f"table {handle.name} cannot be upserted on id columns {columns}: {why} (its columns: {have}); set "
                f"iceberg.table.{handle.name}.id-columns or iceberg.tables.default-id-columns, or the table's "
                "identifier fields")
        handle.id_columns = list(columns)
        handle.equality_ids = [int(schema.findField(c).fieldId()) for c in columns]
        try:
            handle.delete_spec_id = int(self._spark.java_class("tabletopic.TableSpecs").ensureUnpartitionedSpec(
                handle.java))
        except JAVA_ERRORS as exc:
            raise TableError(f"table {handle.name}: cannot add the unpartitioned spec that global equality "
                             f"deletes need: {java_error_message(exc)}") from exc


def _with_iceberg_types(schema: pa.Schema, hidden: dict[str, str]) -> pa.Schema:
    """``schema`` with the Iceberg type of each column whose Arrow type does not tell it (a uuid is a string,
    a fixed a binary) in the field's metadata, for :mod:`tabletopic.write.column_conversion`."""
    if not hidden:
        return schema

    def mark(field: pa.Field, path: str) -> pa.Field:
        if path in hidden:
            return field.with_metadata({**(field.metadata or {}), ICEBERG_TYPE: hidden[path].encode()})
        if pa.types.is_struct(field.type):
            return field.with_type(pa.struct([mark(child, f"{path}.{child.name}") for child in field.type]))
        return field

    return pa.schema([mark(field, field.name) for field in schema], metadata=schema.metadata)
