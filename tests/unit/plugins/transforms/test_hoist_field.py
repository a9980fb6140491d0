"""HoistField$Key and $Value, with Connect's HoistFieldTest cases as facts."""

from __future__ import annotations

import pyarrow as pa

from tests.unit.plugins.transforms.smt import batch, keys, primitive, run, tombstones, values

HOIST = "org.apache.kafka.connect.transforms.HoistField$Value"


def test_a_primitive_is_wrapped_in_one_field() -> None:
    out = run(HOIST, {"field": "magic"}, primitive([42], pa.int32()))
    assert values(out) == [{"magic": 42}] and not out.batches[0].primitive


def test_a_struct_is_nested_under_the_field() -> None:
    assert values(run(HOIST, {"field": "wrapped"}, batch([{"a": 1, "b": "x"}]))) == [{"wrapped": {"a": 1, "b": "x"}}]


def test_a_null_value_is_wrapped_too_and_is_a_tombstone_no_more() -> None:
    out = run(HOIST, {"field": "f"}, tombstones(1))
    assert values(out) == [{"f": None}] and not out.batches[0].tombstone and out.batches[0].schemaless


def test_the_key_variant_wraps_the_key() -> None:
    key = pa.table({"value": ["k1"]})
    out = run("org.apache.kafka.connect.transforms.HoistField$Key", {"field": "id"},
              batch([{"a": 1}], key=key, key_primitive=True))
    assert keys(out) == [{"id": "k1"}] and values(out) == [{"a": 1}]
