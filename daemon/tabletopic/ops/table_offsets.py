"""The offsets a connector's tables hold, read without the JVM, in Kafka Connect's shape.

``tabletopic offsets`` prints them; the REST API's ``GET /connectors/{c}/offsets`` will
serve the same document.  A sink's offsets live in its tables (see
:mod:`tabletopic.commit.source_offsets`), so they are read through pyiceberg with the
connector's catalog settings.  Where several tables hold one partition, the connector
resumes that partition from the lowest of their offsets, so that is the one given.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tabletopic.commit.source_offsets import PyIcebergTable, Recorded, TopicPartition, recorded_in
from tabletopic.config.connector import ConnectorConfig
from tabletopic.write.pyiceberg_catalog import open_table


def read_table_offsets(config: ConnectorConfig, tables: list[str]) -> dict[str, Recorded]:
    out = {}
    for name in tables:
        branch = config.table(name).commit_branch
        out[name] = recorded_in(PyIcebergTable(open_table(config, name)), branch, config.group_id)
    return out


def resume_positions(offsets: Iterable[dict[TopicPartition, int]]) -> dict[TopicPartition, int]:
    """Per partition, the lowest offset any table holds: where the connector resumes it."""
    lowest: dict[TopicPartition, int] = {}
    for held in offsets:
        for tp, offset in held.items():
            lowest[tp] = min(offset, lowest.get(tp, offset))
    return lowest


def connect_document(by_table: dict[str, Recorded]) -> dict[str, Any]:
    """KIP-875's sink shape: ``{"offsets": [{"partition": {...}, "offset": {"kafka_offset": n}}]}``."""
    lowest = resume_positions(r.offsets for r in by_table.values())
    return {"offsets": [{"partition": {"kafka_topic": topic, "kafka_partition": partition},
                         "offset": {"kafka_offset": offset}}
                        for (topic, partition), offset in sorted(lowest.items())]}
