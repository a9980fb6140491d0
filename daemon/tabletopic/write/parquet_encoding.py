"""Encode a table's rows as Parquet files with Arrow's C++ writer, laid out as Iceberg's writer lays them.

Turning Arrow columns into Spark rows, and rows into Parquet pages, was most of the JVM's CPU per
record (docs/performance.md). Arrow encodes the same columns in a fraction of that, on a thread that
does not hold the GIL. The JVM then only copies each file to its place in the table and reads its
metrics from the footer (``tabletopic.EncodedParquet``), so a file is described as Iceberg describes
its own.

Which files qualify is the JVM's decision (``EncodedParquet.layout``): it knows the Iceberg types and
the table's settings. Data files of a table that does not qualify have no :class:`ParquetLayout`, nor
do its equality deletes where they do not, and Iceberg's writer writes them as before.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tabletopic.core import scratch_files

FIELD_ID = b"PARQUET:field_id"


@dataclass(frozen=True)
class ParquetLayout:
    """How one kind of file (data, or equality deletes) of one schema of one table is written: field ids,
    codec, and the sizes Iceberg's writer keeps."""

    schema: pa.Schema  # the table's Arrow schema, each field (nested ones too) carrying its Iceberg id
    codec: str
    level: int | None
    row_group_bytes: int
    page_bytes: int
    page_rows: int
    dict_bytes: int
    file_bytes: int

    def narrowed(self, columns: list[str]) -> ParquetLayout | None:
        """The layout for files of only these top-level ``columns`` (equality deletes' keys); None if one is not."""
        if not all(self.schema.get_field_index(c) >= 0 for c in columns):
            return None
        return replace(self, schema=pa.schema([self.schema.field(c) for c in columns]))


def layouts(arrow_schema: pa.Schema, layout: dict[str, Any]) -> tuple[ParquetLayout | None, ParquetLayout | None]:
    """The layouts the JVM gave for ``arrow_schema``'s data files and equality-delete files (whose keys are
    narrowed from it); None for each it refused (its ``refused`` says why)."""
    if "refused" in layout:
        return None, None
    ids = iter(layout["field_ids"])
    try:
        schema = pa.schema([_with_ids(f, ids) for f in arrow_schema])
    except StopIteration:
        schema = None
    if schema is None or next(ids, None) is not None:
        raise ValueError("the table's field ids do not match its Arrow schema")

    def of(files: dict[str, Any]) -> ParquetLayout | None:
        if "refused" in files:
            return None
        return ParquetLayout(schema, files["codec"], files.get("level"), int(files["row_group_bytes"]),
                             int(files["page_bytes"]), int(files["page_rows"]), int(files["dict_bytes"]),
                             int(files["file_bytes"]))

    return of(layout["data"]), of(layout["deletes"])


def _with_ids(f: pa.Field, ids: Iterator[int]) -> pa.Field:
    """``f`` with its id, then its children's, in the depth-first order ``EncodedParquet`` lists them."""
    own = next(ids)
    t = f.type
    if pa.types.is_struct(t):
        t = pa.struct([_with_ids(c, ids) for c in t])
    elif pa.types.is_map(t):
        key = _with_ids(t.key_field, ids)
        t = pa.map_(key, _with_ids(t.item_field, ids), keys_sorted=t.keys_sorted)
    elif pa.types.is_list(t):
        t = pa.list_(_with_ids(t.value_field, ids))
    elif pa.types.is_large_list(t):
        t = pa.large_list(_with_ids(t.value_field, ids))
    return f.with_type(t).with_metadata({FIELD_ID: str(own).encode()})


@contextlib.contextmanager
def parquet_files(rows: pa.Table, layout: ParquetLayout) -> Iterator[list[str]]:
    """``rows`` (in the layout's schema, ids aside) as Parquet files in the scratch directory, each rolled
    at the layout's target file size (none for no rows); they are removed on leaving."""
    rows = rows.cast(layout.schema)  # the ids are metadata only: no column is copied
    # Row groups are cut by rows; Arrow's in-memory size stands in for Iceberg's count of buffered bytes.
    per_group = max(1, layout.row_group_bytes * rows.num_rows // max(1, rows.nbytes))
    paths: list[str] = []
    try:
        start = 0
        while start < rows.num_rows:
            fd, path = tempfile.mkstemp(prefix=scratch_files.prefix("parquet"), suffix=".parquet")
            os.close(fd)
            paths.append(path)
            # A native file: Arrow writes without taking the GIL back for each page.
            with pa.OSFile(path, "wb") as sink, _writer(sink, layout) as writer:
                while start < rows.num_rows and sink.tell() < layout.file_bytes:
                    group = rows.slice(start, per_group)
                    writer.write_table(group, row_group_size=per_group)
                    start += group.num_rows
        yield paths
    finally:
        for path in paths:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)


def _writer(sink: pa.NativeFile, layout: ParquetLayout) -> pq.ParquetWriter:
    return pq.ParquetWriter(
        sink, layout.schema, compression=layout.codec, compression_level=layout.level, use_dictionary=True,
        write_statistics=True, data_page_size=layout.page_bytes, max_rows_per_page=layout.page_rows,
        dictionary_pagesize_limit=layout.dict_bytes, store_schema=False, store_decimal_as_integer=True)
