"""One connector's Iceberg tables, loaded through the Java catalog and kept: the cache.

All calls go through py4j into Iceberg's Java library inside Spark's JVM. Loaded tables are kept,
least recently used first and at most ``tabletopic.tables.max-cached``, released once idle, and
mirrored in a Java map for calls about many tables at once. The catalog is
:mod:`tabletopic.write.iceberg_catalog`'s, a table's schema and keys are read by
:mod:`tabletopic.write.handle_reader`, and a table missing with auto-create on is made by
:mod:`tabletopic.write.table_creation`.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import structlog

from tabletopic.config.connector import ConnectorConfig, TableConfig
from tabletopic.offsets.source_offsets import Recorded
from tabletopic.write.handle_reader import HandleReader
from tabletopic.write.iceberg_catalog import IcebergCatalog
from tabletopic.write.java_errors import JAVA_ERRORS, java_error_message
from tabletopic.write.java_snapshots import read_refreshed
from tabletopic.write.spark_session import SparkRuntime
from tabletopic.write.table_actions import TableActions
from tabletopic.write.table_creation import CreationSettings, TableCreation
from tabletopic.write.table_handle import CatalogUnavailable, TableError, TableHandle, TableMissing

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class TablesSettings:
    """The connector's keys that its tables' cache reads."""

    catalog_name: str  # iceberg.catalog
    catalog_props: Mapping[str, str] = field(repr=False)  # iceberg.catalog.*, as Iceberg gets them: secrets too
    auto_create: bool  # iceberg.tables.auto-create-enabled
    parquet_encoder: str  # tabletopic.write.parquet-encoder
    write_props: Mapping[str, str]  # iceberg.tables.write-props.*: for the Parquet files Arrow writes itself
    tables_max_cached: int  # tabletopic.tables.max-cached
    tables_idle_release_ms: int  # tabletopic.tables.idle-release-ms
    creation: CreationSettings
    # iceberg.table.<t>.*: a table's commit branch and keys. Not in the repr: a bound method's repr is its
    # whole config's.
    table: Callable[[str], TableConfig] = field(repr=False)

    @classmethod
    def of(cls, config: ConnectorConfig) -> TablesSettings:
        return cls(config.catalog_name, dict(config.catalog_props), config.auto_create, config.parquet_encoder,
                   dict(config.write_props), config.tables_max_cached, config.tables_idle_release_ms,
                   CreationSettings.of(config), config.table)


class IcebergTables:
    """Loads and creates one connector's tables; safe to call from the event loop and the writer thread."""

    def __init__(self, spark: SparkRuntime, settings: TablesSettings,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._spark = spark
        self._settings = settings
        self._clock = clock
        # Loaded tables, least recently used first, at most tables_max_cached: with a table per
        # topic, every table the process ever wrote stayed loaded, its metadata with it.
        self._handles: OrderedDict[str, TableHandle] = OrderedDict()
        self._used_at: dict[str, float] = {}  # per loaded table, when it was last asked for (the clock's time)
        self._seen: set[str] = set()  # every table loaded or created here, cached or not: known()
        self._lock = threading.RLock()
        self._opening: dict[str, Future[None]] = {}  # tables a thread is loading or creating now
        # The loaded tables by name in the JVM too (a ConcurrentHashMap), for calls about many tables at
        # once: handing a thousand tables to one py4j call takes a call each.
        self._by_name: Any = None
        # Order _mirror's py4j calls for each name (a stripe per name); taken before _lock, never under it.
        self._mirror_locks = [threading.Lock() for _ in range(16)]
        self.catalog = IcebergCatalog(spark, settings.catalog_name, settings.catalog_props)
        self._reader = HandleReader(spark, settings.parquet_encoder, settings.write_props, settings.table)
        self._creation = TableCreation(spark, settings.creation, self.catalog.listing)

    def close(self) -> None:
        self.catalog.close()

    @property
    def jvm(self) -> Any:
        return self._spark.jvm

    @property
    def spark(self) -> SparkRuntime:
        return self._spark

    def exists(self, name: str) -> bool:
        return self.catalog.exists(name)

    def tables_recording(self, group_id: str, namespace: str | None = None) -> set[str]:
        return self.catalog.tables_recording(group_id, namespace)

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
        catalog = self.catalog.java()
        ident = self.catalog.ident(name)
        try:
            if catalog.tableExists(ident):
                java = catalog.loadTable(ident)
            elif self._settings.auto_create and sample is not None:
                java = self._creation.create(catalog, ident, name, sample)
            elif self._settings.auto_create:
                raise TableError(f"table {name} does not exist yet; it is created with the first record")
            else:
                raise TableMissing(f"table {name} does not exist; create it, or set "
                                   "iceberg.tables.auto-create-enabled=true")
        except JAVA_ERRORS as exc:
            raise CatalogUnavailable(f"cannot load table {name}: {java_error_message(exc)}") from exc
        return self._reader.read(name, java)

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
            while len(self._handles) > self._settings.tables_max_cached:
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
        if not self._settings.tables_idle_release_ms:
            return []
        before = self._clock() - self._settings.tables_idle_release_ms / 1000
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
        return read_refreshed(handle.java, handle.branch, group_id, self._spark.java_class("tabletopic.TableHeads"))[1]

    def actions(self, name: str) -> TableActions:
        """Table ``name``'s maintenance: its census, rewrites and expiry, as Spark's actions run them."""
        return TableActions(self._spark, self.get(name).java)

    def try_load(self, name: str) -> TableHandle | None:
        """The table if it exists, without creating it."""
        return self.get(name, None) if self.exists(name) else None

    def refresh(self, name: str) -> TableHandle:
        """Re-read the table's metadata (after a commit conflict, or a schema change by someone else)."""
        handle = self.get(name)  # not under the lock: get may wait for another thread opening it
        handle.java.refresh()
        if handle.java.schema().schemaId() != handle.schema_id:
            handle = self._reader.read(name, handle.java)
            self._keep(handle)
        return handle

    def forget(self, name: str) -> None:
        with self._lock:
            dropped = [self._drop(name)] if self._handles.pop(name, None) is not None else []
            self._seen.discard(name)
        self._mirror(dropped)
