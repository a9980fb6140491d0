"""Rows put in a table's shape: order, names, missing and extra columns, nested fields, and values of
another type converted by the Iceberg sink's rules or refused with the column named."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tabletopic.write.arrow_conform import ConformError, conform

POINT = pa.struct([pa.field("x", pa.int64()), pa.field("y", pa.int64())])
TABLE = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string()),
                   pa.field("at", POINT), pa.field("tags", pa.list_(pa.string()))])


@pytest.mark.parametrize(("rows", "case_insensitive", "want"), [
    # Another order, an extra column dropped, missing optional columns null.
    ({"name": ["a"], "extra": [1.5], "id": [1]}, False, [{"id": 1, "name": "a", "at": None, "tags": None}]),
    # Names matched whatever their case, when the connector says so.
    ({"ID": [2], "Name": ["b"]}, True, [{"id": 2, "name": "b", "at": None, "tags": None}]),
    # A struct's missing field is null, its extra field dropped; its fields matched by name.
    ({"id": [3], "at": [{"y": 7, "z": "dropped"}]}, False,
     [{"id": 3, "name": None, "at": {"x": None, "y": 7}, "tags": None}]),
    # Narrower integers widen, as the Iceberg sink's converter takes an int into a long.
    ({"id": pa.array([4], pa.int32()), "at": pa.array([{"x": 1, "y": 2}],
                                                      pa.struct([("x", pa.int16()), ("y", pa.int8())]))}, False,
     [{"id": 4, "name": None, "at": {"x": 1, "y": 2}, "tags": None}]),
    # A number in a string column is its text; a column only nulls so far takes the column's type.
    ({"id": [5], "name": pa.array([12], pa.int64()), "tags": pa.nulls(1)}, False,
     [{"id": 5, "name": "12", "at": None, "tags": None}]),
    # Strings that are numbers go into number columns.
    ({"id": ["6"], "tags": [["t"]]}, False, [{"id": 6, "name": None, "at": None, "tags": ["t"]}]),
    # A structure in a string column is its JSON text.
    ({"id": [7], "tags": [[{"k": 1}]]}, False, [{"id": 7, "name": None, "at": None, "tags": ['{"k":1}']}]),
])
def test_rows_take_the_tables_shape(rows: dict[str, object], case_insensitive: bool,
                                    want: list[dict[str, object]]) -> None:
    conformed = conform(pa.table(rows), TABLE, "db.t", case_insensitive)
    assert conformed.schema == TABLE
    assert conformed.to_pylist() == want


@pytest.mark.parametrize(("rows", "says"), [
    ({"name": ["a"]}, "required column 'id' is missing"),
    ({"id": pa.array([None], pa.int64())}, "column db.t.id is required but the record has null"),
    ({"id": ["seven"]}, "column db.t.id is int64 in the table and string in the record: 'seven'"),
    ({"id": [1], "at": [{"x": "far"}]}, "column db.t.at.x is int64 in the table and string in the record: 'far'"),
    ({"id": [1], "at": [[1]]}, "column db.t.at is struct<x: int64, y: int64> in the table but the record has list"),
])
def test_rows_that_cannot_fit_name_the_column_and_both_types(rows: dict[str, object], says: str) -> None:
    with pytest.raises(ConformError) as raised:
        conform(pa.table(rows), TABLE, "db.t")
    assert says in str(raised.value)


def test_no_rows_conform_too() -> None:
    empty = pa.table({"id": pa.array([], pa.int32())})
    assert conform(empty, TABLE, "db.t").schema == TABLE and conform(empty, TABLE, "db.t").num_rows == 0
