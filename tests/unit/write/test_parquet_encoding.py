"""Arrow's Parquet files for a table: every field carries its Iceberg id, the table's sizes are kept,
and nothing is left behind."""

from __future__ import annotations

import os
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tabletopic.write.parquet_encoding import ParquetLayout, layouts, parquet_files

SCHEMA = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    pa.field("who", pa.struct([("name", pa.string()), ("tags", pa.list_(pa.string()))])),
    pa.field("attrs", pa.map_(pa.string(), pa.int32())),
    pa.field("price", pa.decimal128(9, 2)),
    pa.field("total", pa.decimal128(30, 2)),
])
# As EncodedParquet lists them: a field, then its children (a list's element; a map's key, then value).
IDS = [1, 2, 6, 7, 8, 3, 9, 10, 4, 5]


def files(**sizes: int) -> dict[str, object]:
    return {"codec": "zstd", "level": 3, "row_group_bytes": 128 << 20, "page_bytes": 1 << 20,
            "page_rows": 20_000, "dict_bytes": 2 << 20, "file_bytes": 512 << 20, **sizes}


def plan(**sizes: int) -> ParquetLayout:
    data, deletes = layouts(SCHEMA, {"field_ids": IDS, "data": files(**sizes), "deletes": files()})
    assert data is not None and deletes is not None
    return data


def rows(n: int) -> pa.Table:
    return pa.table({
        "id": pa.array(range(n), pa.int64()),
        "who": [{"name": f"n{i}", "tags": ["a", str(i)]} for i in range(n)],
        "attrs": pa.array([[("k", i)] for i in range(n)], pa.map_(pa.string(), pa.int32())),
        "price": pa.array([Decimal(i) / 100 for i in range(n)], pa.decimal128(9, 2)),
        "total": pa.array([Decimal(i) for i in range(n)], pa.decimal128(30, 2)),
    }, schema=SCHEMA)


def _walk(schema: pa.Schema) -> list[pa.Field]:
    out: list[pa.Field] = []

    def visit(f: pa.Field) -> None:
        out.append(f)
        if pa.types.is_struct(f.type):
            for c in f.type:
                visit(c)
        elif pa.types.is_map(f.type):
            visit(f.type.key_field)
            visit(f.type.item_field)
        elif pa.types.is_list(f.type):
            visit(f.type.value_field)
    for f in schema:
        visit(f)
    return out


def field_ids(path: str) -> list[int]:
    return [int(f.metadata[b"PARQUET:field_id"]) for f in _walk(pq.read_schema(path))]


def test_every_field_nested_or_not_is_written_with_its_iceberg_id() -> None:
    with parquet_files(rows(10), plan()) as paths:
        assert len(paths) == 1
        assert field_ids(paths[0]) == IDS
        back = pq.read_table(paths[0])
    assert back.column("id").to_pylist() == list(range(10))
    assert back.column("who").to_pylist()[3] == {"name": "n3", "tags": ["a", "3"]}


def test_decimals_are_stored_as_iceberg_stores_them() -> None:
    with parquet_files(rows(5), plan()) as paths:
        columns = pq.ParquetFile(paths[0]).schema
        physical = {columns.column(i).name: columns.column(i).physical_type for i in range(len(columns))}
    # Up to 9 digits in an int32, as Iceberg's writer does; past 18 in fixed bytes.
    assert physical["price"] == "INT32"
    assert physical["total"] == "FIXED_LEN_BYTE_ARRAY"


def test_a_refused_table_has_no_layout_and_deletes_may_have_one_where_data_files_do_not() -> None:
    assert layouts(SCHEMA, {"refused": "encrypted"}) == (None, None)
    data, deletes = layouts(SCHEMA, {"field_ids": IDS, "data": {"refused": "partitioned"}, "deletes": files()})
    assert data is None and deletes is not None


def test_equality_deletes_take_their_columns_ids_and_nested_columns_have_none() -> None:
    keys = plan().narrowed(["price", "id"])
    assert keys is not None and keys.schema.names == ["price", "id"]
    assert [f.metadata[b"PARQUET:field_id"] for f in keys.schema] == [b"4", b"1"]
    with parquet_files(rows(4).select(["price", "id"]), keys) as paths:
        assert field_ids(paths[0]) == [4, 1]
    assert plan().narrowed(["who.name"]) is None


def test_ids_that_do_not_match_the_schema_are_an_error() -> None:
    with pytest.raises(ValueError, match="field ids"):
        layouts(SCHEMA, {"field_ids": [*IDS, 11], "data": files(), "deletes": files()})
    with pytest.raises(ValueError, match="field ids"):
        layouts(SCHEMA, {"field_ids": IDS[:-1], "data": files(), "deletes": files()})


def test_files_roll_at_the_target_size_and_keep_every_row_once() -> None:
    # Row groups of about 64 KiB and files of about 128 KiB: several of each.
    with parquet_files(rows(40_000), plan(row_group_bytes=64 << 10, file_bytes=128 << 10)) as paths:
        assert len(paths) > 2
        ids = [i for p in paths for i in pq.read_table(p, columns=["id"]).column("id").to_pylist()]
        assert all(pq.ParquetFile(p).metadata.num_row_groups >= 1 for p in paths)
        assert max(pq.ParquetFile(p).metadata.num_row_groups for p in paths) > 1
    assert ids == list(range(40_000))


def test_no_rows_make_no_file_and_the_files_are_gone_on_leaving() -> None:
    with parquet_files(rows(0), plan()) as none:
        assert none == []
    with parquet_files(rows(3), plan()) as paths:
        assert all(os.path.exists(p) for p in paths)
    assert not any(os.path.exists(p) for p in paths)
