"""Write buffered rows of one table as Parquet data files, on Spark's executors.

Rows cross to the JVM as Arrow (no pandas) and are written by tabletopic's
compiled ``SinkWriter`` through Iceberg's Parquet writers.  Nothing is
committed here: the returned files wait for the commit round.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from tabletopic.buffer.table_buffer import Drained
from tabletopic.observe.metrics import SinkMetrics
from tabletopic.write.arrow_conform import conform
from tabletopic.write.iceberg_tables import TableHandle
from tabletopic.write.spark_session import SparkRuntime
from tabletopic.write.upsert_batch import reduce_changes


@dataclass
class WrittenFiles:
    table: str
    files: Any  # java.util.List<ContentFile>, kept in the JVM until the commit
    file_count: int
    records: int
    max_timestamp_ms: int | None
    seconds: float
    deletes: int = 0
    floors: dict[tuple[str, int], int] = field(default_factory=dict)
    written_at_ms: int = field(default_factory=lambda: int(time.time() * 1000))


class FileWriter:
    def __init__(self, spark: SparkRuntime, write_props: dict[str, str], metrics: SinkMetrics | None = None) -> None:
        self._spark = spark
        self._write_props = dict(write_props)
        self._metrics = metrics

    def _timed(self, stage: str) -> contextlib.AbstractContextManager[None]:
        return self._metrics.timed(stage) if self._metrics is not None else contextlib.nullcontext()

    def _dataframe(self, rows: pa.Table) -> Any:
        with self._timed("handoff"):
            return self._spark.dataframe_from_arrow(rows)._jdf

    @property
    def jvm(self) -> Any:
        return self._spark.jvm

    def write(self, handle: TableHandle, drained: Drained) -> WrittenFiles:
        started = time.monotonic()
        rows = drained.rows
        if rows.schema != handle.arrow_schema:
            # Rows buffered before a schema change lack its new columns or have narrower types.
            rows = conform(rows, handle.arrow_schema, handle.name)
        writer = self._spark.jvm.tabletopic.SinkWriter
        operation = str(uuid.uuid4())
        if not handle.keyed:
            frame = self._dataframe(rows)
            with self._timed("write"):
                files = writer.writeDataFiles(frame, handle.java, handle.schema_id, operation, self._write_props)
            return WrittenFiles(handle.name, files, int(files.size()), drained.records, drained.max_timestamp_ms,
                                time.monotonic() - started, floors=drained.floors)
        with self._timed("buffer"):
            inserts, keys = reduce_changes(rows, drained.ops, drained.order, handle.id_columns)
        frame = self._dataframe(keys)
        with self._timed("write"):
            files = writer.writeEqualityDeletes(frame, handle.java, handle.delete_spec_id, handle.equality_ids,
                                                operation, self._write_props)
        if inserts.num_rows:
            frame = self._dataframe(inserts)
            with self._timed("write"):
                data = writer.writeDataFiles(frame, handle.java, handle.schema_id, operation, self._write_props)
            files = writer.concat(data, files)
        return WrittenFiles(handle.name, files, int(files.size()), inserts.num_rows, drained.max_timestamp_ms,
                            time.monotonic() - started, deletes=keys.num_rows, floors=drained.floors)
