"""ReplaceField$Key and $Value, with Connect's ReplaceFieldTest cases as facts."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tabletopic.config.connector_keys import TRANSFORM_GROUP
from tabletopic.config.plugin_names import available_plugins
from tests.unit.plugins.transforms.smt import batch, failed, keys, run, tombstones, values

REPLACE = "org.apache.kafka.connect.transforms.ReplaceField$Value"
ROW = {"dont": "whatever", "abc": 42, "foo": True, "etc": "etc"}


@pytest.mark.parametrize(("props", "expected"), [
    ({"exclude": "dont", "renames": "abc:xyz,foo:bar"}, {"xyz": 42, "bar": True, "etc": "etc"}),
    ({"include": "abc,foo", "renames": "abc:xyz,foo:bar"}, {"xyz": 42, "bar": True}),
    ({"include": "abc,dont", "exclude": "dont"}, {"abc": 42}),  # exclude wins
    ({"whitelist": "abc"}, {"abc": 42}),  # the name before Kafka 3.0
    ({"blacklist": "abc,foo,etc"}, {"dont": "whatever"}),
    ({}, ROW),
])
@pytest.mark.parametrize("schemaless", [False, True])
def test_keep_drop_rename(props: dict[str, str], expected: dict[str, object], schemaless: bool) -> None:
    assert values(run(REPLACE, props, batch([ROW], schemaless=schemaless))) == [expected]


@pytest.mark.parametrize("renames", ["abc", "abc:", "abc:def:ghi"])
def test_a_rename_that_is_not_old_new_is_refused(renames: str) -> None:
    with pytest.raises(ValueError, match="Invalid rename mapping"):
        available_plugins(TRANSFORM_GROUP)[REPLACE].load()().configure({"renames": renames})


def test_two_fields_renamed_to_one_name() -> None:
    props = {"renames": "abc:foo"}
    assert "field name duplication foo" in failed(run(REPLACE, props, batch([ROW])))[0]
    assert values(run(REPLACE, props, batch([ROW], schemaless=True))) == [{"dont": "whatever", "foo": True,
                                                                          "etc": "etc"}]


def test_a_tombstone_passes_and_the_key_variant_works_on_the_key() -> None:
    assert values(run(REPLACE, {"exclude": "a"}, tombstones(1))) == [None]
    out = run("org.apache.kafka.connect.transforms.ReplaceField$Key", {"renames": "id:key_id"},
              batch([{"a": 1}], key=pa.table({"id": [7]})))
    assert keys(out) == [{"key_id": 7}] and values(out) == [{"a": 1}]
