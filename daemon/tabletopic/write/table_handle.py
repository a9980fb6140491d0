"""A table as the sink sees it, and why one cannot be used.

A :class:`TableHandle` keeps the Java table and the Arrow schema that rows must have (derived from the
Iceberg schema through Spark's type mapping, so what the writer receives is exactly what Spark expects).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from tabletopic.convert.isolation import SystemUnavailable
from tabletopic.offsets.source_offsets import SnapshotView
from tabletopic.write.java_errors import JAVA_ERRORS
from tabletopic.write.java_snapshots import JavaSnapshots
from tabletopic.write.parquet_encoding import ParquetLayout


class TableError(RuntimeError):
    """A table cannot be used; the message names the table and what to do."""


class TableMissing(TableError):
    """The table does not exist, and auto-create is off."""


class CatalogUnavailable(SystemUnavailable):
    """The catalog or the storage behind it failed: the system's fault, never a record's.

    Records are never dead-lettered for it: the sink waits and reads them again.
    """


# A catalog or its storage failing reaches Python as our wrapper or as the Java exception itself.
CATALOG_ERRORS: tuple[type[Exception], ...] = (CatalogUnavailable, *JAVA_ERRORS)


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

    def snapshots(self) -> SnapshotView:
        """The table's snapshots and properties as they were last read (a py4j call per read)."""
        return JavaSnapshots(self.java)
