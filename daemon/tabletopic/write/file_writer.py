"""Write buffered rows of one table or many as Parquet data files, on Spark's executors or the driver.

Where Arrow can encode a table's data files (``parquet_encoding``), it does, here, and the JVM places
them.  Other rows cross to the JVM as Arrow (no pandas) and are written by tabletopic's compiled
``FileBatch`` through Iceberg's Parquet writers.  Nothing is committed here: the returned files wait
for the commit round.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from tabletopic.buffer.table_buffer import Drained
from tabletopic.observe.metrics import SinkMetrics
from tabletopic.write.arrow_conform import conform
from tabletopic.write.parquet_encoding import parquet_files
from tabletopic.write.spark_session import MIN_ROWS_PER_TASK, SparkRuntime, arrow_file
from tabletopic.write.table_handle import TableHandle
from tabletopic.write.upsert_batch import reduce_changes


@dataclass
class WrittenFiles:
    table: str
    files: list[dict[str, Any]]  # Iceberg's content files as JSON, as answers carry them
    records: int
    max_timestamp_ms: int | None
    seconds: float
    deletes: int = 0
    floors: dict[tuple[str, int], int] = field(default_factory=dict)
    written_at_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    valid_through_ms: int | None = None  # see buffer.table_buffer.Drained

    @property
    def file_count(self) -> int:
        return len(self.files)


class FileWriter:
    def __init__(self, spark: SparkRuntime, write_props: dict[str, str], metrics: SinkMetrics | None = None) -> None:
        self._spark = spark
        self._write_props = dict(write_props)
        self._metrics = metrics

    def _timed(self, stage: str) -> contextlib.AbstractContextManager[None]:
        return self._metrics.timed(stage) if self._metrics is not None else contextlib.nullcontext()

    def _on_driver(self, rows: pa.Table) -> bool:
        """Rows a Spark task would take alone, where the driver is the executors (a local master)."""
        return self._spark.local and rows.num_rows <= MIN_ROWS_PER_TASK

    def _add(self, batch: Any, handle: TableHandle, rows: pa.Table, kept: contextlib.ExitStack,
             deletes: bool) -> int | None:
        """Adds ``rows`` to ``batch`` as data files, or with ``deletes`` as equality-delete files of the keys
        they hold; returns the part's index in the batch's answer, None where no file is written."""
        if deletes:
            layout = handle.delete_parquet.narrowed(rows.column_names) if handle.delete_parquet else None
            shape: tuple[Any, ...] = (handle.delete_spec_id, handle.equality_ids)
        else:
            layout, shape = handle.parquet, (handle.schema_id,)
        if layout is not None:
            with self._timed("encode"):
                paths = kept.enter_context(parquet_files(rows, layout))
            if not paths:
                return None
            if deletes:
                return int(batch.addEncodedEqualityDeletes("\n".join(paths), handle.java, *shape))
            return int(batch.addEncodedData("\n".join(paths), handle.java))  # the rows' schema is in the files
        if not self._on_driver(rows):
            with self._timed("handoff"):
                frame = self._spark.dataframe_from_arrow(rows)._jdf
            add = batch.addEqualityDeletes if deletes else batch.addData
            return int(add(frame, handle.java, *shape))
        path, spark_type = kept.enter_context(arrow_file(rows))
        add = batch.addLocalEqualityDeletes if deletes else batch.addLocalData
        return int(add(path, spark_type, handle.java, *shape))

    def _shaped(self, handle: TableHandle, drained: Drained) -> tuple[pa.Table | None, pa.Table | None]:
        """(rows for data files, keys for equality-delete files) of one table's write; None: no such file."""
        rows = drained.rows
        if rows.schema != handle.arrow_schema:
            # Rows buffered before a schema change lack its new columns or have narrower types.
            rows = conform(rows, handle.arrow_schema, handle.name)
        if not handle.keyed:
            return rows, None
        with self._timed("buffer"):
            inserts, keys = reduce_changes(rows, drained.ops, drained.order, handle.id_columns)
        return (inserts if inserts.num_rows else None), keys

    @property
    def jvm(self) -> Any:
        return self._spark.jvm

    def write(self, handle: TableHandle, drained: Drained) -> WrittenFiles:
        return self.write_many([(handle, drained)])[0]

    def write_many(self, items: list[tuple[TableHandle, Drained]]) -> list[WrittenFiles]:
        """The files of each table's rows, in the order given.

        A job costs the driver the same whether it writes one row or a million, and a round may write
        hundreds of tables: with a local master, rows that would make one task are written on the
        driver with no job (``tabletopic.FileBatch``), side by side and while one job writes the rest.
        """
        started = time.monotonic()
        batch = self._spark.java_class("tabletopic.FileBatch")(str(uuid.uuid4()), self._write_props)
        shaped = [self._shaped(handle, drained) for handle, drained in items]
        parts: list[list[int | None]] = [[None, None] for _ in items]  # data part, delete part
        # The Arrow files of the driver's parts are read in batch.writeJson(), and removed after it.
        with contextlib.ExitStack() as kept:
            try:
                for (handle, _), (rows, keys), part in zip(items, shaped, parts, strict=True):
                    if rows is not None:
                        part[0] = self._add(batch, handle, rows, kept, deletes=False)
                    if keys is not None:
                        part[1] = self._add(batch, handle, keys, kept, deletes=True)
                with self._timed("write"):
                    files: list[list[dict[str, Any]]] = json.loads(batch.writeJson())
            except BaseException:
                with contextlib.suppress(Exception):  # a dead JVM holds nothing more; the first error tells why
                    batch.abandon()  # the broadcast tables of the parts added so far
                raise
        seconds = time.monotonic() - started
        written = []
        for (handle, drained), (rows, keys), indexes in zip(items, shaped, parts, strict=True):
            content = [f for i in indexes if i is not None for f in files[i]]
            records = drained.records if keys is None else rows.num_rows if rows is not None else 0
            written.append(WrittenFiles(handle.name, content, records,
                                        drained.max_timestamp_ms, seconds,
                                        deletes=keys.num_rows if keys is not None else 0, floors=drained.floors,
                                        valid_through_ms=drained.valid_through_ms))
        return written
