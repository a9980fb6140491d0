"""The Iceberg sink's JsonToMapTransform, with its TestJsonToMapUtils/TestJsonToMapTransform cases as facts."""

from __future__ import annotations

import json
from decimal import Decimal

import pyarrow as pa

from tests.unit.plugins.transforms.smt import batch, failed, primitive, run, tombstones, values

J2M = "org.apache.iceberg.connect.transforms.JsonToMapTransform"
DOC = {
    "string": "string", "int": 42, "long": 3147483647, "boolean": True, "float_is_double": 3.0, "double": 0.3,
    "null": None, "empty_obj": {}, "empty_arr": [], "empty_arr_arr": [[], []], "empty_string": "",
    "array_empty_object": [{}, {}], "nested_object_contains_empty": [{}, {"one": 1}], "array_int": [1, 1],
    "array_array_int": [[1, 1], [2, 2]], "array_objects": [{"key": 1}],
    "array_array_objects": [[{"key": 1}], [{"key": 2, "other": {"ugly": [1, 2]}}]],
    "array_array_inconsistent": [[1], [2.0]], "array_different_types": ["one", 1],
    "nested_obj": {"key": {"nested_key": 1}}, "bytes": "SGVsbG8=", "bigInt": 354736184430273859332531123456,
    "double_of_1e10": 1e10,
}


def test_each_json_type_becomes_the_type_the_iceberg_transform_gives() -> None:
    out = run(J2M, {}, primitive([json.dumps(DOC)]))
    (row,) = values(out)
    assert row == {
        "string": "string", "int": 42, "long": 3147483647, "boolean": True, "float_is_double": 3.0, "double": 0.3,
        "empty_string": "", "array_empty_object": [[], []], "nested_object_contains_empty": [[], [("one", "1")]],
        "array_int": [1, 1], "array_array_int": [[1, 1], [2, 2]], "array_objects": [[("key", "1")]],
        "array_array_objects": [[[("key", "1")]], [[("key", "2"), ("other", '{"ugly":[1,2]}')]]],
        "array_array_inconsistent": [["1"], ["2.0"]], "array_different_types": ["one", "1"],
        "nested_obj": [("key", '{"nested_key":1}')], "bytes": "SGVsbG8=",
        "bigInt": Decimal("354736184430273859332531123456"), "double_of_1e10": 1e10,
    }
    schema = out.batches[0].value.schema
    assert schema.field("int").type == pa.int32() and schema.field("long").type == pa.int64()
    assert schema.field("bigInt").type == pa.decimal128(38, 0) and not out.batches[0].schemaless


def test_at_the_root_one_map_of_strings() -> None:
    out = run(J2M, {"json.root": "true"}, primitive(['{"key":1,"a":"a","n":null,"f":1e10}']))
    assert values(out) == [{"payload": [("key", "1"), ("a", "a"), ("n", "null"), ("f", "1.0E10")]}]


def test_records_of_different_shapes_are_batches_of_their_own() -> None:
    out = run(J2M, {}, primitive(['{"a": 1}', '{"b": "x"}', '{"a": 2}']))
    assert values(out) == [{"a": 1}, {"b": "x"}, {"a": 2}] and len(out.batches) == 2


def test_what_is_not_a_json_object_fails_alone_and_a_tombstone_passes() -> None:
    out = run(J2M, {}, primitive(['{"a": 1}', "not_a_json_object", '{"key": 1,"""***', "[1]"]))
    assert sorted(failed(out)) == [1, 2, 3] and "not valid json" in failed(out)[1]
    assert "Expected json object" in failed(out)[3]
    assert values(run(J2M, {}, tombstones(1))) == [None]
    assert "use StringConverter" in failed(run(J2M, {}, batch([{"a": 1}])))[0]
