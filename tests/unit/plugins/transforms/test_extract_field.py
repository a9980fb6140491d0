"""ExtractField$Key and $Value with KIP-821 paths, with Connect's ExtractFieldTest and SingleFieldPathTest cases."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tabletopic_plugins.transforms.extract_field import field_path
from tests.unit.plugins.transforms.smt import batch, failed, keys, run, tombstones, values

EXTRACT = "org.apache.kafka.connect.transforms.ExtractField$Value"


@pytest.mark.parametrize(("path", "steps"), [
    ("foo", ["foo"]),
    ("foo.bar", ["foo", "bar"]),
    ("foo.bar.baz", ["foo", "bar", "baz"]),
    ("`foo.bar`.baz", ["foo.bar", "baz"]),
    ("foo.`bar.baz`", ["foo", "bar.baz"]),
    ("`foo\\`.bar`.baz", ["foo`.bar", "baz"]),
    ("`foo`bar`.baz", ["foo`bar", "baz"]),
    ("foo.", ["foo", ""]),
    (".foo", ["", "foo"]),
    ("``", [""]),
])
def test_v2_paths(path: str, steps: list[str]) -> None:
    assert field_path(path, "V2") == steps


@pytest.mark.parametrize("path", ["`foo.bar", "`foo.bar\\`"])
def test_an_unclosed_backtick_is_refused(path: str) -> None:
    with pytest.raises(ValueError, match="Incomplete backtick pair"):
        field_path(path, "V2")


def test_a_struct_field_becomes_the_value_and_a_primitive_one_a_primitive() -> None:
    records = batch([{"magic": 42, "inner": {"a": 1}}])
    assert values(run(EXTRACT, {"field": "magic"}, records)) == [42]
    out = run(EXTRACT, {"field": "inner"}, records)
    assert values(out) == [{"a": 1}] and not out.batches[0].primitive


def test_a_null_extracted_value_makes_the_record_a_tombstone() -> None:
    out = run(EXTRACT, {"field": "inner"}, batch([{"inner": {"a": 1}}, {"inner": None}]))
    assert values(out) == [{"a": 1}, None]
    assert [b.tombstone for b in sorted(out.batches, key=lambda b: int(b.offsets[0]))] == [False, True]


def test_a_nested_path_with_v2_and_a_dotted_name_with_v1() -> None:
    records = batch([{"a.b": 1, "a": {"b": 2}}])
    assert values(run(EXTRACT, {"field": "a.b"}, records)) == [1]
    assert values(run(EXTRACT, {"field": "a.b", "field.syntax.version": "v2"}, records)) == [2]


def test_a_missing_field_fails_with_a_schema_and_is_null_without() -> None:
    assert failed(run(EXTRACT, {"field": "nope"}, batch([{"a": 1}]))) == {0: "transform 't': Unknown field: nope"}
    assert values(run(EXTRACT, {"field": "nope"}, batch([{"a": 1}], schemaless=True))) == [None]


def test_a_null_value_passes_and_the_key_variant_extracts_from_the_key() -> None:
    assert values(run(EXTRACT, {"field": "a"}, tombstones(1))) == [None]
    out = run("org.apache.kafka.connect.transforms.ExtractField$Key", {"field": "id"},
              batch([{"v": 1}], key=pa.table({"id": [9], "other": [1]})))
    assert keys(out) == [9] and out.batches[0].key_primitive
