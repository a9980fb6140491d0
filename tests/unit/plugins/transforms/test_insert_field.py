"""InsertField$Key and $Value, with Connect's InsertFieldTest cases as facts."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from tabletopic.config.connector_keys import TRANSFORM_GROUP
from tabletopic.config.plugin_names import available_plugins
from tests.unit.plugins.transforms.smt import batch, failed, keys, primitive, run, tombstones, values

INSERT = "org.apache.kafka.connect.transforms.InsertField$Value"
ALL = {"topic.field": "topic_field!", "partition.field": "partition_field", "offset.field": "offset_field!",
       "timestamp.field": "timestamp_field?", "static.field": "instance_id", "static.value": "my-instance-id"}


@pytest.mark.parametrize(("props", "error"), [({}, "No field insertion configured"),
                                              ({"static.field": "s"}, "No value specified for static field")])
def test_settings_connect_refuses(props: dict[str, str], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        available_plugins(TRANSFORM_GROUP)[INSERT].load()().configure(props)


def test_with_a_schema_the_metadata_fields_are_typed_as_connect_types_them() -> None:
    out = run(INSERT, ALL, batch([{"magic": 42}], timestamps=[1_500_000_000_000], partition=3))
    (row,) = values(out)
    assert row == {"magic": 42, "topic_field": "orders", "partition_field": 3, "offset_field": 100,
                   "timestamp_field": dt.datetime.fromtimestamp(1_500_000_000, dt.UTC),
                   "instance_id": "my-instance-id"}
    schema = out.batches[0].value.schema
    assert schema.field("partition_field").type == pa.int32() and schema.field("offset_field").type == pa.int64()


def test_schemaless_the_timestamp_is_epoch_millis_and_a_present_field_is_replaced() -> None:
    records = batch([{"magic": 42, "instance_id": "old"}], schemaless=True, timestamps=[1_500_000_000_000])
    out = run(INSERT, ALL, records)
    (row,) = values(out)
    assert row["timestamp_field"] == 1_500_000_000_000 and row["instance_id"] == "my-instance-id"


def test_with_a_schema_a_present_field_cannot_be_added_again() -> None:
    out = run(INSERT, {"static.field": "magic", "static.value": "x"}, batch([{"magic": 42}]))
    assert failed(out) == {0: "transform 't': Cannot create field because of field name duplication magic"}


def test_the_topic_is_the_one_a_transform_before_gave() -> None:
    records = batch([{"a": 1}]).with_topic("renamed")
    assert values(run(INSERT, {"topic.field": "t"}, records)) == [{"a": 1, "t": "renamed"}]


def test_a_tombstone_passes_and_a_primitive_fails() -> None:
    assert values(run(INSERT, ALL, tombstones(1))) == [None]
    out = run(INSERT, ALL, primitive(["x"]))
    assert failed(out) == {0: "transform 't': Only Struct objects supported for [field insertion], found: "
                              "java.lang.String"}


def test_the_key_variant_inserts_into_the_key_and_passes_a_null_key() -> None:
    key = pa.table({"id": [1]})
    out = run("org.apache.kafka.connect.transforms.InsertField$Key", {"static.field": "s", "static.value": "v"},
              batch([{"a": 1}], key=key))
    assert keys(out) == [{"id": 1, "s": "v"}] and values(out) == [{"a": 1}]
    out = run("org.apache.kafka.connect.transforms.InsertField$Key", {"static.field": "s", "static.value": "v"},
              batch([{"a": 1}]))
    assert keys(out) == [None]
