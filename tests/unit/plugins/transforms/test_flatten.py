"""Flatten$Key and $Value, with Connect's FlattenTest cases as facts."""

from __future__ import annotations

import pyarrow as pa

from tests.unit.plugins.transforms.smt import batch, failed, keys, primitive, run, tombstones, values

FLATTEN = "org.apache.kafka.connect.transforms.Flatten$Value"


def test_nested_structs_become_delimited_fields_and_arrays_stay() -> None:
    rows = [{"A": {"B": {"int8": 8, "boolean": True}, "list": [1, 2]}, "top": "x"}]
    out = run(FLATTEN, {"delimiter": "#"}, batch(rows))
    assert values(out) == [{"A#B#int8": 8, "A#B#boolean": True, "A#list": [1, 2], "top": "x"}]
    assert values(run(FLATTEN, {}, batch(rows))) == [{"A.B.int8": 8, "A.B.boolean": True, "A.list": [1, 2],
                                                      "top": "x"}]


def test_a_null_struct_leaves_its_fields_null() -> None:
    out = run(FLATTEN, {}, batch([{"a": {"b": 1}}, {"a": None}]))
    assert values(out) == [{"a.b": 1}, {"a.b": None}]


def test_a_map_field_is_refused_with_a_schema() -> None:
    records = batch(pa.table({"m": pa.array([[("k", 1)]], pa.map_(pa.string(), pa.int64()))}))
    assert failed(run(FLATTEN, {}, records)) == {
        0: "transform 't': Flatten transformation does not support MAP for record with schemas (for field m)."}


def test_two_fields_flattened_to_one_name() -> None:
    rows = [{"a.b": 1, "a": {"b": 2}}]
    assert "field name duplication a.b" in failed(run(FLATTEN, {}, batch(rows)))[0]
    assert values(run(FLATTEN, {}, batch(rows, schemaless=True))) == [{"a.b": 2}]


def test_a_tombstone_passes_a_primitive_fails_and_the_key_variant_flattens_the_key() -> None:
    assert values(run(FLATTEN, {}, tombstones(1))) == [None]
    assert "Only Struct objects supported for [flattening]" in failed(run(FLATTEN, {}, primitive([1])))[0]
    out = run("org.apache.kafka.connect.transforms.Flatten$Key", {"delimiter": "_"},
              batch([{"v": 1}], key=pa.Table.from_pylist([{"k": {"id": 1}}])))
    assert keys(out) == [{"k_id": 1}]
