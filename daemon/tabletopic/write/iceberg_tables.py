"""Iceberg tables as the sink sees them: loaded or auto-created through the Java catalog.

All calls go through py4j into Iceberg's Java library inside Spark's JVM.  A
:class:`TableHandle` keeps the Java table and the Arrow schema that rows must
have (derived from the Iceberg schema through Spark's type mapping, so what the
writer receives is exactly what Spark expects).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import structlog
from py4j.protocol import Py4JError
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.types import StructType

from tabletopic.config.connector import ConnectorConfig
from tabletopic.config.partition_by import PartitionField
from tabletopic.isolation import SystemUnavailable
from tabletopic.offsets.source_offsets import Recorded, read_refreshed, tables_recording
from tabletopic.write.column_conversion import ICEBERG_TYPE
from tabletopic.write.java_errors import JAVA_ERRORS, JavaErrorKind, classify, java_error_message
from tabletopic.write.parquet_encoding import ParquetLayout, layouts
from tabletopic.write.spark_session import SparkRuntime

log = structlog.get_logger(__name__)
# Every commit writes a new metadata.json; at a commit every few seconds Iceberg's default keeps the
# last 100 forever-growing copies. As AutoMQ sets on the tables it creates: old ones are deleted, and
# only the last 10 kept. iceberg.tables.auto-create-props.* overrides any of them.
CREATED_TABLE_PROPS = {"format-version": "2", "write.metadata.delete-after-commit.enabled": "true",
                       "write.metadata.previous-versions-max": "10"}


class TableError(RuntimeError):
    """A table cannot be used; the message names the table and what to do."""


class TableMissing(TableError):
    """The table does not exist, and auto-create is off."""


class CatalogUnavailable(SystemUnavailable):
    """The catalog or the storage behind it failed: the system's fault, never a record's.

    Records are never dead-lettered for it: the sink waits and reads them again.
    """


@dataclass
class TableHandle:
    name: str
    java: Any  # org.apache.iceberg.Table
    arrow_schema: pa.Schema
    schema_id: int
    branch: str | None
    # Keyed (upsert/CDC) tables only: the id columns, their field ids, and the spec of delete files.
    id_columns: list[str] = field(default_factory=list)
    equality_ids: list[int] = field(default_factory=list)
    delete_spec_id: int | None = None
    # Set where Arrow encodes the table's data files, or its equality deletes (tabletopic.write.parquet-encoder);
    # None where Iceberg's writer does.
    parquet: ParquetLayout | None = None
    delete_parquet: ParquetLayout | None = None

    @property
    def keyed(self) -> bool:
        return bool(self.id_columns)


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


class IcebergTables:
    """Loads and creates one connector's tables; safe to call from the event loop and the writer thread."""

    def __init__(self, spark: SparkRuntime, config: ConnectorConfig,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._spark = spark
        self._config = config
        self._clock = clock
        # Loaded tables, least recently used first, at most config.tables_max_cached: with a table per
        # topic, every table the process ever wrote stayed loaded, its metadata with it.
        self._handles: OrderedDict[str, TableHandle] = OrderedDict()
        self._used_at: dict[str, float] = {}  # per loaded table, when it was last asked for (the clock's time)
        self._seen: set[str] = set()  # every table loaded or created here, cached or not: known()
        self._lock = threading.RLock()
        self._opening: dict[str, Future[None]] = {}  # tables a thread is loading or creating now
        self._listing: Any = None
        # The catalog is looked up once: through Spark's catalog manager it took five py4j calls, for
        # every table a Table Topic connector creates. It stays valid while this connector uses it.
        self._java_catalog: Any = None
        self._namespaces: set[str] = set()  # known to exist, so not asked again for each new table
        # The loaded tables by name in the JVM too (a ConcurrentHashMap), for calls about many tables at
        # once: handing a thousand tables to one py4j call takes a call each.
        self._by_name: Any = None
        # Order _mirror's py4j calls for each name (a stripe per name); taken before _lock, never under it.
        self._mirror_locks = [threading.Lock() for _ in range(16)]
        spark.register_catalog(config.catalog_name, config.catalog_props)

    def close(self) -> None:
        """This connector no longer uses its catalog name (a reconfiguration may change its properties)."""
        with self._lock:
            self._java_catalog = None
        self._spark.release_catalog(self._config.catalog_name)

    @property
    def jvm(self) -> Any:
        return self._spark.jvm

    @property
    def spark(self) -> SparkRuntime:
        return self._spark

    def _catalog(self) -> Any:
        if self._java_catalog is not None:
            return self._java_catalog
        try:
            with self._lock:
                self._java_catalog = self._spark.iceberg_catalog(self._config.catalog_name)
                return self._java_catalog
        except JAVA_ERRORS as exc:
            raise CatalogUnavailable(f"cannot open Iceberg catalog {self._config.catalog_name!r} "
                                     f"({java_error_message(exc)}); check the iceberg.catalog.* keys") from exc

    def jvm_catalog(self) -> Any:
        return self._catalog()

    def listing_catalog(self) -> Any:
        """The catalog itself, not Spark's caching wrapper, which hides namespace listing."""
        with self._lock:
            if self._listing is None:
                session = self._spark.activate()
                props = {k: v for k, v in self._config.catalog_props.items()}
                self._listing = self.jvm.org.apache.iceberg.CatalogUtil.buildIcebergCatalog(
                    self._config.catalog_name, props, session.sparkContext._jsc.hadoopConfiguration())
            return self._listing

    def tables_recording(self, group_id: str, namespace: str | None = None) -> set[str]:
        """The catalog's tables, in ``namespace`` and under it or anywhere, that record ``group_id``'s
        offsets: those a dynamically routed connector may have written."""
        catalog = self.jvm.org.apache.iceberg.catalog
        # Namespace.of takes varargs, which py4j cannot pass: parse a table name in it instead.
        root = catalog.TableIdentifier.parse(f"{namespace}.t").namespace() if namespace else catalog.Namespace.empty()
        return tables_recording(self.listing_catalog(), root, group_id)

    def _ident(self, name: str) -> Any:
        return self._spark.java_class("org.apache.iceberg.catalog.TableIdentifier").parse(name)

    def known(self) -> list[str]:
        """The tables this connector has loaded or created since it started."""
        with self._lock:
            return list(self._seen)

    def loaded(self, name: str) -> bool:
        """Whether ``name`` is loaded now: :meth:`get` returns it without a catalog call."""
        with self._lock:
            return name in self._handles

    def loaded_count(self) -> int:
        with self._lock:
            return len(self._handles)

    def exists(self, name: str) -> bool:
        try:
            return bool(self._catalog().tableExists(self._ident(name)))
        except JAVA_ERRORS as exc:
            raise CatalogUnavailable(f"cannot look up table {name}: {java_error_message(exc)}") from exc

    def get(self, name: str, sample: pa.Schema | None = None) -> TableHandle:
        """The table, created from ``sample`` if it is missing and auto-create is on.

        Different tables open side by side (a Table Topic connector meets hundreds at once); a caller
        asking for a table another thread is opening waits for it, then tries itself if that failed.
        """
        while True:
            with self._lock:
                handle = self._handles.get(name)
                if handle is not None:
                    self._handles.move_to_end(name)
                    self._used_at[name] = self._clock()
                    return handle
                opening = self._opening.get(name)
                if opening is None:
                    opening = self._opening[name] = Future()
                    break
            with contextlib.suppress(Exception):  # its error is its caller's; this one tries on its own
                opening.result()
        try:
            handle = self._open(name, sample)
            self._keep(handle)
            return handle
        finally:
            with self._lock:
                del self._opening[name]
            opening.set_result(None)

    def _open(self, name: str, sample: pa.Schema | None) -> TableHandle:
        catalog = self._catalog()
        ident = self._ident(name)
        try:
            if catalog.tableExists(ident):
                java = catalog.loadTable(ident)
            elif self._config.auto_create and sample is not None:
                java = self._create(catalog, ident, name, sample)
            elif self._config.auto_create:
                raise TableError(f"table {name} does not exist yet; it is created with the first record")
            else:
                raise TableMissing(f"table {name} does not exist; create it, or set "
                                   "iceberg.tables.auto-create-enabled=true")
        except JAVA_ERRORS as exc:
            raise CatalogUnavailable(f"cannot load table {name}: {java_error_message(exc)}") from exc
        return self._handle(name, java)

    def java_tables(self) -> Any:
        """The loaded tables as a Java ``Map<String, Table>``, kept in step with :meth:`get`'s cache.

        A table just loaded or released may be missing from it, or still in it, for a moment: callers
        load and check a missing one on their own, and a released table's object still works.
        """
        with self._mirror_locks[0]:
            if self._by_name is None:
                self._by_name = self.jvm.java.util.concurrent.ConcurrentHashMap()
            return self._by_name

    def _keep(self, handle: TableHandle) -> None:
        """Cache ``handle``, dropping the least recently used past the bound; the Java map follows once the
        lock is released (see :meth:`_mirror`)."""
        with self._lock:
            self._handles[handle.name] = handle
            self._handles.move_to_end(handle.name)
            self._used_at[handle.name] = self._clock()
            self._seen.add(handle.name)
            changed = [handle.name]
            while len(self._handles) > self._config.tables_max_cached:
                changed.append(self._drop(self._handles.popitem(last=False)[0]))
        self._mirror(changed)

    def _drop(self, name: str) -> str:
        """A table no longer loaded (the caller holds the lock, took it out of _handles, and mirrors it)."""
        self._used_at.pop(name, None)
        return name

    def _mirror(self, names: list[str]) -> None:
        """Make the Java map say of ``names`` what the cache says now.

        Not under ``_lock``: a py4j call waits for the interpreter's lock, and the event loop's
        :meth:`get` waited behind it (2 s of a 1,000-table backlog in py-spy). A name's state is read
        and set under its stripe's lock, so whichever thread mirrors a name last sets its latest
        state; threads opening other tables do not wait for it.
        """
        if not names:
            return
        java = self.java_tables()
        for name in names:
            with self._mirror_locks[hash(name) % len(self._mirror_locks)]:
                with self._lock:
                    handle = self._handles.get(name)
                if handle is None:
                    java.remove(name)
                else:
                    java.put(name, handle.java)

    def release_idle(self) -> list[str]:
        """Release the loaded tables not asked for in tabletopic.tables.idle-release-ms; their names.

        Every write and commit asks for its table, so these are the tables of quiet topics. A handle a
        thread still holds keeps working; the next rows load the table again.
        """
        if not self._config.tables_idle_release_ms:
            return []
        before = self._clock() - self._config.tables_idle_release_ms / 1000
        released = []
        with self._lock:
            # Least recently used first: the scan stops at the first table used since.
            while self._handles and self._used_at[next(iter(self._handles))] <= before:
                released.append(self._drop(self._handles.popitem(last=False)[0]))
        self._mirror(released)
        return released

    def recorded(self, name: str, group_id: str) -> Recorded:
        """What table ``name`` records for ``group_id``, read from its newest metadata, a snapshot a py4j call."""
        handle = self.get(name)
        return read_refreshed(handle.java, handle.branch, group_id, self._spark.java_class("tabletopic.SinkWriter"))[1]

    def try_load(self, name: str) -> TableHandle | None:
        """The table if it exists, without creating it."""
        return self.get(name, None) if self.exists(name) else None

    def refresh(self, name: str) -> TableHandle:
        """Re-read the table's metadata (after a commit conflict, or a schema change by someone else)."""
        handle = self.get(name)  # not under the lock: get may wait for another thread opening it
        handle.java.refresh()
        if handle.java.schema().schemaId() != handle.schema_id:
            handle = self._handle(name, handle.java)
            self._keep(handle)
        return handle

    def forget(self, name: str) -> None:
        with self._lock:
            dropped = [self._drop(name)] if self._handles.pop(name, None) is not None else []
            self._seen.discard(name)
        self._mirror(dropped)

    def _handle(self, name: str, java: Any) -> TableHandle:
        encoder = self._config.parquet_encoder
        # A cluster's executors are there to take the encoding off the daemon's host: auto leaves it to them.
        by_arrow = encoder == "arrow" or (encoder == "auto" and self._spark.local)
        current = json.loads(self._spark.java_class("tabletopic.TableShapes").currentJson(
            java, json.dumps(self._config.write_props) if by_arrow else None))
        arrow = _with_iceberg_types(to_arrow_schema(StructType.fromJson(json.loads(current["spark"]))),
                                    current.get("iceberg", {}))
        handle = TableHandle(name, java, arrow, int(current["schema_id"]), self._config.table(name).commit_branch)
        if by_arrow:
            handle.parquet, handle.delete_parquet = layouts(arrow, current["parquet"])
        if self._config.table(name).keyed:
            self._key(handle)
        return handle

    def _key(self, handle: TableHandle) -> None:
        """Resolve the id columns of a keyed table and the spec its equality deletes use."""
        schema = handle.java.schema()
        # Set ones win; else the table's identifier fields, as Iceberg's own writers take them.
        columns = self._config.table(handle.name).id_columns or [str(c) for c in schema.identifierFieldNames()]
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
            handle.delete_spec_id = int(self._spark.java_class("tabletopic.SinkWriter").ensureUnpartitionedSpec(
                handle.java))
        except JAVA_ERRORS as exc:
            raise TableError(f"table {handle.name}: cannot add the unpartitioned spec that global equality "
                             f"deletes need: {java_error_message(exc)}") from exc

    def _create(self, catalog: Any, ident: Any, name: str, sample: pa.Schema) -> Any:
        schema, dropped = _strip_nulls(sample, self._config.force_optional)
        if dropped:
            log.warning("columns with only nulls so far are left out of the new table", table=name, columns=dropped)
        if not len(schema):
            raise TableError(f"cannot create table {name}: the first records have no typed columns")
        schema = pa.schema([f.with_type(_null_free(f.type)) for f in schema])
        keyed = self._config.table(name).keyed
        id_columns = self._config.table(name).id_columns if keyed else []
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
        props = {**CREATED_TABLE_PROPS, **self._config.auto_create_props}
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
            self._spark.java_class("tabletopic.SinkWriter").setIdentifierFields(java, id_columns)
        log.info("created table", table=name, partition_by=[str(p) for p in self._config.table(name).partition_by],
                 columns=schema.names, identifier_fields=id_columns)
        return java

    def _ensure_namespace(self, table: str, ident: Any) -> None:
        """REST and Glue catalogs refuse a table in a namespace nobody created; JDBC and hadoop make it."""
        known = _namespace_of(table)
        if not known or known in self._namespaces:
            return
        catalog = self.listing_catalog()  # Spark's caching wrapper has no namespace API
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
        fields: list[PartitionField] = self._config.table(name).partition_by
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
