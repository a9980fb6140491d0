"""The offsets a connector's tables hold, read without the JVM, in Kafka Connect's shape.

``tabletopic offsets`` prints them; the REST API's ``GET /connectors/{c}/offsets`` will
serve the same document.  A sink's offsets live in its tables (see
:mod:`tabletopic.offsets.source_offsets`), so they are read through pyiceberg with the
connector's catalog settings.  Each partition's offset is where the connector resumes it by
its tables alone (the rule in :mod:`tabletopic.offsets.resume`, with no consumer group asked).  The
REST API also reads the group's offsets, as the sink does, and may answer a higher offset where the
group holds one: then the tables' round starts no longer count.
"""

from __future__ import annotations

from typing import Any

from tabletopic.config.connector import ConnectorConfig
from tabletopic.offsets.resume import tables_resume
from tabletopic.offsets.source_offsets import PyIcebergTable, Recorded, recorded_in
from tabletopic.write.pyiceberg_catalog import open_table


def read_table_offsets(config: ConnectorConfig, tables: list[str]) -> dict[str, Recorded]:
    out = {}
    for name in tables:
        branch = config.table(name).commit_branch
        out[name] = recorded_in(PyIcebergTable(open_table(config, name)), branch, config.group_id)
    return out


def connect_document(by_table: dict[str, Recorded]) -> dict[str, Any]:
    """KIP-875's sink shape: ``{"offsets": [{"partition": {...}, "offset": {"kafka_offset": n}}]}``."""
    lowest = tables_resume(by_table)
    return {"offsets": [{"partition": {"kafka_topic": topic, "kafka_partition": partition},
                         "offset": {"kafka_offset": offset}}
                        for (topic, partition), offset in sorted(lowest.items())]}
