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
