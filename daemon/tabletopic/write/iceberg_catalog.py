"""One connector's Iceberg catalog in the JVM: registered with Spark, looked up once, asked about tables."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from tabletopic.write.java_errors import JAVA_ERRORS, java_error_message
from tabletopic.write.java_snapshots import tables_recording
from tabletopic.write.spark_session import SparkRuntime
from tabletopic.write.table_handle import CatalogUnavailable


class IcebergCatalog:
    """The catalog a connector's ``iceberg.catalog.*`` keys name, as Iceberg's Java library holds it.

    Safe to call from any thread; every call but :meth:`close` is a py4j call, so none is made on the
    event loop.
    """

    def __init__(self, spark: SparkRuntime, name: str, props: Mapping[str, str]) -> None:
        self._spark = spark
        self.name = name
        self._props = props
        self._lock = threading.Lock()
        # Looked up once: through Spark's catalog manager it took five py4j calls, for every table a
        # Table Topic connector creates. It stays valid while this connector uses it.
        self._java: Any = None
        self._listing: Any = None
        spark.register_catalog(name, props)

    def close(self) -> None:
        """This connector no longer uses its catalog name (a reconfiguration may change its properties)."""
        with self._lock:
            self._java = None
        self._spark.release_catalog(self.name)

    def java(self) -> Any:
        """Spark's Iceberg catalog of this name; CatalogUnavailable if it cannot be opened."""
        if self._java is not None:
            return self._java
        try:
            with self._lock:
                self._java = self._spark.iceberg_catalog(self.name)
                return self._java
        except JAVA_ERRORS as exc:
            raise CatalogUnavailable(f"cannot open Iceberg catalog {self.name!r} ({java_error_message(exc)}); "
                                     "check the iceberg.catalog.* keys") from exc

    def check(self) -> None:
        """Open the catalog now, so that a start says what is wrong with it (CatalogUnavailable)."""
        self.java()

    def listing(self) -> Any:
        """The catalog itself, not Spark's caching wrapper, which hides namespace listing."""
        with self._lock:
            if self._listing is None:
                session = self._spark.activate()
                self._listing = self._spark.jvm.org.apache.iceberg.CatalogUtil.buildIcebergCatalog(
                    self.name, dict(self._props), session.sparkContext._jsc.hadoopConfiguration())
            return self._listing

    def ident(self, name: str) -> Any:
        """Iceberg's ``TableIdentifier`` of a dotted table name."""
        return self._spark.java_class("org.apache.iceberg.catalog.TableIdentifier").parse(name)

    def exists(self, name: str) -> bool:
        try:
            return bool(self.java().tableExists(self.ident(name)))
        except JAVA_ERRORS as exc:
            raise CatalogUnavailable(f"cannot look up table {name}: {java_error_message(exc)}") from exc

    def tables_recording(self, group_id: str, namespace: str | None = None) -> set[str]:
        """The catalog's tables, in ``namespace`` and under it or anywhere, that record ``group_id``'s
        offsets: those a dynamically routed connector may have written."""
        catalog = self._spark.jvm.org.apache.iceberg.catalog
        # Namespace.of takes varargs, which py4j cannot pass: parse a table name in it instead.
        root = catalog.TableIdentifier.parse(f"{namespace}.t").namespace() if namespace else catalog.Namespace.empty()
        return tables_recording(self.listing(), root, group_id)
