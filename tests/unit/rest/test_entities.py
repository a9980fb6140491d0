"""Connect's JSON shapes, and the offsets document a PATCH takes."""

from __future__ import annotations

import pytest

from tabletopic.config.connector_keys import CONNECTOR_KEYS
from tabletopic.config.definition import Problem
from tabletopic.connectors.refusals import BadRequest
from tabletopic.connectors.status_board import TaskStatus
from tabletopic.rest import entities


def test_state_info_leaves_an_empty_trace_out_as_connect_does() -> None:
    tasks = [TaskStatus("h1:8083", "RUNNING"), TaskStatus("h2:8083", "FAILED", "boom")]
    assert entities.connector_state_info("c", "RUNNING", "h1:8083", None, tasks) == {
        "name": "c", "connector": {"state": "RUNNING", "worker_id": "h1:8083"},
        "tasks": [{"id": 0, "state": "RUNNING", "worker_id": "h1:8083"},
                  {"id": 1, "state": "FAILED", "trace": "boom", "worker_id": "h2:8083"}],
        "type": "sink"}


def test_connector_info_hides_inline_secrets_and_keeps_placeholders() -> None:
    info = entities.connector_info("c", {"name": "c", "iceberg.catalog.jdbc.password": "s3cret",
                                         "iceberg.catalog.credential": "${file:/etc/x:cred}"}, 1)
    assert info["config"] == {"name": "c", "iceberg.catalog.jdbc.password": "[hidden]",
                              "iceberg.catalog.credential": "${file:/etc/x:cred}"}
    assert info["tasks"] == [{"connector": "c", "task": 0}] and info["type"] == "sink"


def test_offsets_round_trip_and_null_forgets_a_partition() -> None:
    doc = entities.connector_offsets({("t", 1): 7, ("t", 0): 5})
    assert doc == {"offsets": [
        {"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": {"kafka_offset": 5}},
        {"partition": {"kafka_topic": "t", "kafka_partition": 1}, "offset": {"kafka_offset": 7}}]}
    doc["offsets"][1]["offset"] = None
    assert entities.parse_offsets(doc) == {("t", 0): 5, ("t", 1): None}


@pytest.mark.parametrize("doc, message", [
    ({}, "Partitions / offsets need to be provided"),
    ({"offsets": []}, "Partitions / offsets need to be provided"),
    ({"offsets": [{"partition": {"kafka_partition": 0}, "offset": None}]}, "kafka_topic"),
    ({"offsets": [{"partition": {"kafka_topic": "t", "kafka_partition": -1}, "offset": None}]}, "kafka_partition"),
    ({"offsets": [{"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": {"kafka_offset": "5"}}]},
     "kafka_offset"),
    ({"offsets": [{"partition": {"kafka_topic": "t", "kafka_partition": True}, "offset": None}]}, "kafka_partition"),
])
def test_bad_offsets_documents_are_refused_with_what_is_wrong(doc: object, message: str) -> None:
    with pytest.raises(BadRequest, match=message):
        entities.parse_offsets(doc)


def test_config_infos_counts_every_error_and_keeps_undeclared_problems() -> None:
    problems = [Problem("iceberg.control.commit.interval-ms", "soon", "must be a whole number (int)"),
                Problem("iceberg.catalog.*", None, "a rest catalog needs iceberg.catalog.uri")]
    infos = entities.config_infos("org.apache.iceberg.connect.IcebergSinkConnector", CONNECTOR_KEYS,
                                  {"name": "c", "iceberg.control.commit.interval-ms": "soon"}, problems)
    assert infos["error_count"] == 2
    by_name = {c["value"]["name"]: c for c in infos["configs"]}
    assert by_name["iceberg.control.commit.interval-ms"]["value"]["errors"] == [
        "iceberg.control.commit.interval-ms='soon': must be a whole number (int)"]
    assert by_name["iceberg.catalog.*"]["definition"] is None
    assert by_name["name"]["definition"]["required"] is True and by_name["name"]["value"]["value"] == "c"
    assert {"Common", "Catalog", "Tables", "Commits", "Maintenance"} <= set(infos["groups"])
