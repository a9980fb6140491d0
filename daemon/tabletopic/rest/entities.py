"""Kafka Connect's REST entities, field for field (``connect/runtime`` ``rest/entities``).

Each function builds one JSON shape; nothing here decides anything.  Configurations are
shown as written with secrets hidden (:func:`tabletopic.observe.secrets.redact`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tabletopic.config.definition import Key, KeyType, Problem
from tabletopic.connectors.refusals import BadRequest
from tabletopic.connectors.status_board import TaskStatus
from tabletopic.core.topic_partition import TopicPartition
from tabletopic.observe.secrets import redact

CONNECTOR_TYPE = "sink"


def error(status: int, message: str) -> dict[str, Any]:
    """``ErrorMessage``."""
    return {"error_code": status, "message": message}


def connector_info(name: str, config: Mapping[str, str], tasks: int) -> dict[str, Any]:
    """``ConnectorInfo``: tasks are ``ConnectorTaskId``s."""
    return {"name": name, "config": redact(config), "tasks": [{"connector": name, "task": i} for i in range(tasks)],
            "type": CONNECTOR_TYPE}


def _state(state: str, worker_id: str, trace: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"state": state}
    if trace:  # Connect leaves an empty trace out
        out["trace"] = trace
    out["worker_id"] = worker_id
    return out


def task_state(task_id: int, status: TaskStatus) -> dict[str, Any]:
    """``ConnectorStateInfo.TaskState``."""
    return {"id": task_id, **_state(status.state, status.worker_id, status.trace)}


def connector_state_info(name: str, state: str, worker_id: str, trace: str | None,
                         tasks: list[TaskStatus]) -> dict[str, Any]:
    """``ConnectorStateInfo``."""
    return {"name": name, "connector": _state(state, worker_id, trace),
            "tasks": [task_state(i, t) for i, t in enumerate(tasks)], "type": CONNECTOR_TYPE}


def task_info(name: str, task_id: int, config: Mapping[str, str]) -> dict[str, Any]:
    """``TaskInfo``: every task of a tabletopic connector runs the connector's own configuration."""
    return {"id": {"connector": name, "task": task_id}, "config": redact(config)}


def active_topics(name: str, topics: Iterable[str]) -> dict[str, Any]:
    """``{connector: ActiveTopicsInfo}``, as ``GET /connectors/{c}/topics`` answers."""
    return {name: {"topics": sorted(topics)}}


def connector_offsets(positions: Mapping[TopicPartition, int]) -> dict[str, Any]:
    """``ConnectorOffsets`` in a sink connector's shape (KIP-875)."""
    return {"offsets": [{"partition": {"kafka_topic": topic, "kafka_partition": partition},
                         "offset": {"kafka_offset": offset}}
                        for (topic, partition), offset in sorted(positions.items())]}


def parse_offsets(doc: Any) -> dict[TopicPartition, int | None]:
    """A ``PATCH /connectors/{c}/offsets`` body; BadRequest says what is wrong with it, as Connect does."""
    if not isinstance(doc, dict) or not isinstance(doc.get("offsets"), list) or not doc["offsets"]:
        raise BadRequest("Partitions / offsets need to be provided for an alter offsets request")
    out: dict[TopicPartition, int | None] = {}
    for entry in doc["offsets"]:
        partition = entry.get("partition") if isinstance(entry, dict) else None
        if not isinstance(partition, dict):
            raise BadRequest("Each offset needs a 'partition' object with 'kafka_topic' and 'kafka_partition'")
        topic, number = partition.get("kafka_topic"), partition.get("kafka_partition")
        if not isinstance(topic, str) or not topic:
            raise BadRequest("The value for the key 'kafka_topic' in the partition map must be a non-empty string")
        if isinstance(number, bool) or not isinstance(number, int) or number < 0:
            raise BadRequest("The value for the key 'kafka_partition' in the partition map must be a "
                             "non-negative integer")
        offset = entry.get("offset")
        if offset is None:
            out[(topic, number)] = None
            continue
        value = offset.get("kafka_offset") if isinstance(offset, dict) else None
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise BadRequest("The value for the key 'kafka_offset' in the offset map must be a non-negative integer")
        out[(topic, number)] = value
    return out


def plugin_info(class_name: str, plugin_type: str, version: str | None) -> dict[str, Any]:
    """``PluginInfo``: Connect leaves the version out where a plugin has none."""
    out: dict[str, Any] = {"class": class_name, "type": plugin_type}
    if version:
        out["version"] = version
    return out


_TYPES = {KeyType.STRING: "STRING", KeyType.INT: "INT", KeyType.LONG: "LONG", KeyType.BOOLEAN: "BOOLEAN",
          KeyType.LIST: "LIST", KeyType.REGEX: "STRING", KeyType.PASSWORD: "PASSWORD", KeyType.PREFIX: "STRING"}


def _group(name: str) -> str:
    if name.startswith("iceberg.catalog"):
        return "Catalog"
    if name.startswith(("iceberg.table", "iceberg.tables")):
        return "Tables"
    if name.startswith("iceberg.control"):
        return "Commits"
    if name.startswith("tabletopic.maintenance"):
        return "Maintenance"
    if name.startswith("tabletopic."):
        return "tabletopic"
    if name.startswith("errors."):
        return "Error Handling"
    if name.startswith("transforms"):
        return "Transforms"
    return "Common"


def config_key_info(key: Key, order: int) -> dict[str, Any]:
    """``ConfigKeyInfo``."""
    default = key.default
    if isinstance(default, list):
        default = ",".join(default)
    elif isinstance(default, bool):
        default = "true" if default else "false"
    return {"name": key.name, "type": _TYPES[key.type], "required": key.required,
            "default_value": None if default is None else str(default),
            "importance": "HIGH" if key.required else "MEDIUM", "documentation": key.doc, "group": _group(key.name),
            "order": order, "width": "NONE", "display_name": key.name, "dependents": []}


def config_infos(plugin: str, keys: Mapping[str, Key], config: Mapping[str, str],
                 problems: list[Problem]) -> dict[str, Any]:
    """``ConfigInfos``: every declared key with its value and its errors, then problems of keys not declared."""
    errors: dict[str, list[str]] = {}
    for problem in problems:
        errors.setdefault(problem.key, []).append(str(problem))
    shown = redact(config)
    configs: list[dict[str, Any]] = []
    groups: list[str] = []
    for order, key in enumerate(k for k in keys.values() if k.type is not KeyType.PREFIX):
        info = config_key_info(key, order)
        if info["group"] not in groups:
            groups.append(info["group"])
        value = shown.get(key.name, info["default_value"])
        configs.append({"definition": info, "value": {"name": key.name, "value": value, "recommended_values":
                                                      list(key.allowed or ()), "errors": errors.pop(key.name, []),
                                                      "visible": True}})
    for name, messages in errors.items():  # problems of a family of keys, or of several keys together
        configs.append({"definition": None, "value": {"name": name, "value": shown.get(name), "recommended_values": [],
                                                      "errors": messages, "visible": True}})
    return {"name": plugin, "error_count": sum(len(c["value"]["errors"]) for c in configs), "groups": groups,
            "configs": configs}
