"""A new column's type for a field without a schema: its own, except a field of timestamp strings."""

from __future__ import annotations

import pyarrow as pa

from tabletopic.write.new_columns import LOCAL, ZONED, new_column_types


def test_a_field_of_timestamp_strings_becomes_a_timestamp_column_with_a_zone_when_they_carry_one() -> None:
    rows = pa.table({"at": ["2023-05-18T11:22:33Z", None, "2023-05-18 03:22:33-08:00"],
                     "local": ["2023-05-18T11:22:33", "2023-05-18 11:22", None],
                     "day": ["2023-05-18", "2023-05-19", None],  # a date alone is no timestamp: a string
                     "mixed": ["2023-05-18T11:22:33Z", "soon", None],
                     "n": [1, 2, 3]})
    types = {f.name: f.type for f in new_column_types(rows)}
    assert types == {"at": ZONED, "local": LOCAL, "day": pa.string(), "mixed": pa.string(), "n": pa.int64()}


def test_inside_an_object_too() -> None:
    rows = pa.table({"meta": [{"at": "2023-05-18T11:22:33+01:00", "who": "x"}, None]})
    assert new_column_types(rows).field("meta").type == pa.struct([("at", ZONED), ("who", pa.string())])
