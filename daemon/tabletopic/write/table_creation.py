"""A table auto-created from its first records: its schema, partition spec, properties and namespace.

As the Iceberg sink creates one: columns from the first records that are not deletes (a column with
only nulls so far is left out), id columns required and made the identifier fields, the partition
spec of ``partition-by``, and ``auto-create-props`` over the defaults below.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import structlog
from py4j.protocol import Py4JError
from pyspark.sql.pandas.types import from_arrow_schema

from tabletopic.config.connector import ConnectorConfig, TableConfig
from tabletopic.config.partition_by import PartitionField
from tabletopic.write.java_errors import JAVA_ERRORS, JavaErrorKind, classify, java_error_message
from tabletopic.write.spark_session import SparkRuntime
from tabletopic.write.table_handle import TableError

log = structlog.get_logger(__name__)
# Every commit writes a new metadata.json; at a commit every few seconds Iceberg's default keeps the
# last 100 forever-growing copies. As AutoMQ sets on the tables it creates: old ones are deleted, and
# only the last 10 kept. iceberg.tables.auto-create-props.* overrides any of them.
CREATED_TABLE_PROPS = {"format-version": "2", "write.metadata.delete-after-commit.enabled": "true",
                       "write.metadata.previous-versions-max": "10"}


def _namespace_of(table: str) -> str:
    """The namespace of a table name, as ``TableIdentifier.parse`` reads it ("" for none)."""
    return table.rpartition(".")[0]


def _strip_nulls(schema: pa.Schema, force_optional: bool) -> tuple[pa.Schema, list[str]]:
    """Columns whose type is still unknown (only nulls seen) cannot be created; report them."""
    kept, dropped = [], []
    for f in schema:
        if pa.types.is_null(f.type):
            dropped.append(f.name)
            continue
        kept.append(_optional(f) if force_optional else f)
    return pa.schema(kept), dropped


def _optional(f: pa.Field) -> pa.Field:
    if pa.types.is_struct(f.type):
        f = f.with_type(pa.struct([_optional(c) for c in f.type]))
    return f.with_nullable(True)


def _null_free(t: pa.DataType) -> pa.DataType:
    if pa.types.is_null(t):
        return pa.string()
    if pa.types.is_struct(t):
        return pa.struct([c.with_type(_null_free(c.type)) for c in t])
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(_null_free(t.value_type))
    return t


@dataclass(frozen=True)
class CreationSettings:
    """The connector's keys that making a table reads."""

    auto_create_props: Mapping[str, str]  # iceberg.tables.auto-create-props.*
    force_optional: bool  # iceberg.tables.schema-force-optional
    # iceberg.table.<t>.*: a table's keys and partition spec. Not in the repr: a bound method's repr is its
    # whole config's.
    table: Callable[[str], TableConfig] = field(repr=False)

    @classmethod
    def of(cls, config: ConnectorConfig) -> CreationSettings:
        return cls(dict(config.auto_create_props), config.force_optional, config.table)


class TableCreation:
    """Creates one connector's tables; called from the threads that open them."""

    def __init__(self, spark: SparkRuntime, settings: CreationSettings, listing_catalog: Callable[[], Any]) -> None:
        self._spark = spark
        self._settings = settings
        self._listing_catalog = listing_catalog  # the catalog itself: Spark's caching wrapper has no namespaces
        self._namespaces: set[str] = set()  # known to exist, so not asked again for each new table

    def create(self, catalog: Any, ident: Any, name: str, sample: pa.Schema) -> Any:
        """A new table of ``sample``'s columns, named ``ident`` in the Java ``catalog``; the table another
        daemon created first, if one did."""
        schema, dropped = _strip_nulls(sample, self._settings.force_optional)
        if dropped:
            log.warning("columns with only nulls so far are left out of the new table", table=name, columns=dropped)
        if not len(schema):
            raise TableError(f"cannot create table {name}: the first records have no typed columns")
        schema = pa.schema([f.with_type(_null_free(f.type)) for f in schema])
        keyed = self._settings.table(name).keyed
        id_columns = self._settings.table(name).id_columns if keyed else []
        if keyed and not id_columns:
            raise TableError(f"cannot create table {name} for upsert or CDC: no id columns are set; set "
                             f"iceberg.table.{name}.id-columns or iceberg.tables.default-id-columns (a table "
                             "that exists may name its identifier fields instead)")
        if id_columns:
            # Identifier fields must be required columns.
            missing = [c for c in id_columns if c not in schema.names]
            if missing:
                raise TableError(f"cannot create table {name}: id columns {missing} are not in the first records "
                                 f"(fields: {schema.names})")
            schema = pa.schema([f.with_nullable(False) if f.name in id_columns else f for f in schema])
        # A zone-less Arrow timestamp (Avro's local-timestamp) is Iceberg's timestamp, not timestamptz.
        spark_type = from_arrow_schema(schema, prefer_timestamp_ntz=True)
        shapes = self._spark.java_class("tabletopic.TableShapes")
        iceberg_schema = shapes.icebergSchema(spark_type.json())
        spec = self._spec(iceberg_schema, name)
        props = {**CREATED_TABLE_PROPS, **self._settings.auto_create_props}
        self._ensure_namespace(name, ident)
        try:
            java = shapes.create(catalog, ident, iceberg_schema, spec, json.dumps(props))
        except JAVA_ERRORS as exc:
            kind = classify(exc)
            if kind is JavaErrorKind.ALREADY_EXISTS:  # another daemon won the race
                return catalog.loadTable(ident)
            if kind is JavaErrorKind.NO_SUCH_NAMESPACE:  # dropped since: made again next time
                self._namespaces.discard(_namespace_of(name))
            raise
        if id_columns:
            self._spark.java_class("tabletopic.TableSpecs").setIdentifierFields(java, id_columns)
        log.info("created table", table=name, partition_by=[str(p) for p in self._settings.table(name).partition_by],
                 columns=schema.names, identifier_fields=id_columns)
        return java

    def _ensure_namespace(self, table: str, ident: Any) -> None:
        """REST and Glue catalogs refuse a table in a namespace nobody created; JDBC and hadoop make it."""
        known = _namespace_of(table)
        if not known or known in self._namespaces:
            return
        catalog = self._listing_catalog()
        try:
            namespace = ident.namespace()
            if not catalog.namespaceExists(namespace):
                catalog.createNamespace(namespace)
                log.info("created namespace", namespace=namespace.toString())
            self._namespaces.add(known)
        except JAVA_ERRORS as exc:
            # Another daemon made it first, or the catalog makes none (createTable decides then).
            if classify(exc) not in (JavaErrorKind.ALREADY_EXISTS, JavaErrorKind.REFUSED):
                raise
        except Py4JError:  # a catalog without namespaces (no SupportsNamespaces): createTable decides
            pass

    def _spec(self, iceberg_schema: Any, name: str) -> Any:
        fields: list[PartitionField] = self._settings.table(name).partition_by
        builder = self._spark.java_class("org.apache.iceberg.PartitionSpec").builderFor(iceberg_schema)
        for f in fields:
            try:
                if f.transform == "identity":
                    builder.identity(f.column)
                elif f.transform in ("year", "month", "day", "hour"):
                    getattr(builder, f.transform)(f.column)
                elif f.transform == "bucket":
                    builder.bucket(f.column, f.width)
                elif f.transform == "truncate":
                    builder.truncate(f.column, f.width)
            except JAVA_ERRORS as exc:
                raise TableError(
                    f"cannot partition table {name} by {f}: {java_error_message(exc)} "
                    f"(columns: {[c.name() for c in iceberg_schema.columns()]}); fix its partition-by"
                ) from exc
        return builder.build()
