"""ValueToKey, with Connect's ValueToKeyTest cases as facts."""

from __future__ import annotations

from tests.unit.plugins.transforms.smt import batch, failed, keys, run, tombstones, values

V2K = "org.apache.kafka.connect.transforms.ValueToKey"


def test_the_key_is_made_of_the_fields_in_the_order_given() -> None:
    out = run(V2K, {"fields": "b,a"}, batch([{"a": 1, "b": 2, "c": 3}]))
    assert keys(out) == [{"b": 2, "a": 1}] and values(out) == [{"a": 1, "b": 2, "c": 3}]
    assert list(out.batches[0].key.column_names) == ["b", "a"]


def test_a_missing_field_fails_with_a_schema_and_is_null_without() -> None:
    assert failed(run(V2K, {"fields": "a,x"}, batch([{"a": 1}]))) == {0: "transform 't': Field does not exist: x"}
    assert keys(run(V2K, {"fields": "a,x"}, batch([{"a": 1}], schemaless=True))) == [{"a": 1, "x": None}]


def test_a_tombstone_fails_as_in_connect() -> None:
    assert "found: null" in failed(run(V2K, {"fields": "a"}, tombstones(1)))[0]
