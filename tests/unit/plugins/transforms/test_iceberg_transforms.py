"""The Iceberg sink's CopyValue, DmsTransform and KafkaMetadataTransform, with its tests' cases as facts."""

from __future__ import annotations

import pytest

from tests.unit.plugins.transforms.smt import batch, failed, primitive, run, tombstones, values

COPY = "org.apache.iceberg.connect.transforms.CopyValue"
DMS = "org.apache.iceberg.connect.transforms.DmsTransform"
META = "org.apache.iceberg.connect.transforms.KafkaMetadataTransform"


@pytest.mark.parametrize("schemaless", [False, True])
def test_copy_value(schemaless: bool) -> None:
    out = run(COPY, {"source.field": "data", "target.field": "data_copy"}, batch([{"data": "foo"}],
                                                                                 schemaless=schemaless))
    assert values(out) == [{"data": "foo", "data_copy": "foo"}]


def test_copy_value_of_a_field_a_struct_lacks_fails() -> None:
    assert list(failed(run(COPY, {"source.field": "x", "target.field": "y"}, batch([{"a": 1}])))) == [0]
    assert values(run(COPY, {"source.field": "x", "target.field": "y"}, tombstones(1))) == [None]


def dms(operation: str) -> dict[str, object]:
    return {"data": {"id": 1, "account": "x"},
            "metadata": {"timestamp": "2024-01-01T00:00:00Z", "record-type": "data", "operation": operation,
                         "partition-key-type": "schema-table", "schema-name": "db", "table-name": "tbl",
                         "transaction-id": 12345}}


@pytest.mark.parametrize(("operation", "op"), [("insert", "I"), ("load", "I"), ("update", "U"), ("delete", "D")])
def test_dms(operation: str, op: str) -> None:
    out = run(DMS, {}, batch([dms(operation)], schemaless=True))
    assert values(out) == [{"id": 1, "account": "x", "_cdc": {"op": op, "ts": "2024-01-01T00:00:00Z",
                                                               "source": "db.tbl"}}]


def test_dms_drops_what_is_no_dms_record_and_refuses_a_schema() -> None:
    assert values(run(DMS, {}, batch([{"other": 1}], schemaless=True))) == []
    assert failed(run(DMS, {}, batch([dms("insert")]))) == {0: "transform 't': Schema not support for DMS records"}


def test_kafka_metadata_flat_and_nested() -> None:
    records = batch([{"id": 1}], topic="topic", partition=0, timestamps=[100])
    records.offsets[:] = 1000
    assert values(run(META, {}, records)) == [{"id": 1, "_kafka_metadata_topic": "topic",
                                               "_kafka_metadata_partition": 0, "_kafka_metadata_offset": 1000,
                                               "_kafka_metadata_timestamp": 100}]
    out = run(META, {"field_name": "_some_field", "nested": "true", "external_field": "external,value"}, records)
    assert values(out) == [{"id": 1, "_some_field": {"topic": "topic", "partition": 0, "offset": 1000,
                                                     "timestamp": 100, "external": "value"}}]


def test_kafka_metadata_settings_and_nulls() -> None:
    from tabletopic.config.connector_keys import TRANSFORM_GROUP
    from tabletopic.config.plugin_names import available_plugins

    with pytest.raises(ValueError, match="Could not parse"):
        available_plugins(TRANSFORM_GROUP)[META].load()().configure({"external_field": "a,b,c"})
    assert values(run(META, {}, tombstones(1))) == [None]
    assert list(failed(run(META, {}, primitive(["x"])))) == [0]
