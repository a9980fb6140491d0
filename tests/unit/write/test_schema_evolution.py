"""Schema evolution plans: what a record may change in its table, and what it may not."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tabletopic.write.schema_evolution import EvolutionError, plan

TABLE = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("n", pa.int32(), nullable=False)])


def test_a_nullable_field_makes_a_required_column_optional() -> None:
    record = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("n", pa.int32())])
    assert [str(c) for c in plan(TABLE, record, "t")] == ["optional n"]


def test_an_id_column_stays_required_when_records_may_lack_it() -> None:
    # Schemaless JSON makes every field nullable; Iceberg refuses an optional identifier field,
    # so a keyed table would retry that change for ever. A null key fails its record instead.
    record = pa.schema([pa.field("id", pa.int64()), pa.field("n", pa.int32())])
    assert [str(c) for c in plan(TABLE, record, "t", identifiers=["id"])] == ["optional n"]


def test_new_fields_and_wider_types() -> None:
    record = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("n", pa.int64(), nullable=False),
                        pa.field("note", pa.string())])
    assert [str(c) for c in plan(TABLE, record, "t")] == ["widen n int64", "add note string"]


def test_a_narrowing_is_an_error_naming_the_field() -> None:
    record = pa.schema([pa.field("id", pa.binary(), nullable=False)])
    with pytest.raises(EvolutionError, match="field id is int64 in the table but binary"):
        plan(TABLE, record, "t")


def test_records_without_a_schema_only_add_fields_and_promote_no_type() -> None:
    """The Iceberg connector's own test: a schemaless {"id": 1} leaves an int column int, and the value is
    converted into it; a nullable field makes no column optional; a new field is added."""
    table = pa.schema([pa.field("id", pa.int32(), nullable=False), pa.field("v", pa.float32())])
    record = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.float64()), pa.field("note", pa.string())])
    assert [str(c) for c in plan(table, record, "t", schemaless=True)] == ["add note string"]
    assert [str(c) for c in plan(table, record, "t")] == ["optional id", "widen id int64", "widen v double",
                                                          "add note string"]


def test_a_value_that_converts_into_the_column_needs_no_change() -> None:
    table = pa.schema([pa.field("ts", pa.timestamp("us", tz="UTC")), pa.field("d", pa.date32()),
                       pa.field("s", pa.string())])
    record = pa.schema([pa.field("ts", pa.int64()), pa.field("d", pa.string()), pa.field("s", pa.float64())])
    assert plan(table, record, "t", schemaless=True) == []
    with pytest.raises(EvolutionError, match="neither evolves"):
        plan(table, pa.schema([pa.field("ts", pa.bool_())]), "t", schemaless=True)
