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

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tabletopic.config.connector import ConnectorConfig
from tabletopic.offsets.resume import tables_resume
from tabletopic.offsets.source_offsets import PyIcebergTable, Recorded, recorded_in
from tabletopic.write.pyiceberg_catalog import open_table


@dataclass(frozen=True)
class RecordingTables:
    """The connector's keys that reading its offsets from its tables needs, through pyiceberg."""

    name: str  # name
    group_id: str  # consumer.override.group.id, or connect-<name>: the offsets' owner in each snapshot
    catalog_name: str  # iceberg.catalog
    catalog_props: Mapping[str, str] = field(repr=False)  # iceberg.catalog.*: secrets too
    branch: Callable[[str], str | None] = field(repr=False)  # iceberg.table.<t>.commit-branch, or the default one

    @classmethod
    def of(cls, config: ConnectorConfig) -> RecordingTables:
        return cls(config.name, config.group_id, config.catalog_name, dict(config.catalog_props),
                   lambda table: config.table(table).commit_branch)

    def open(self, table: str) -> Any:
        return open_table(self, table)

    def recorded(self, table: Any, name: str) -> Recorded:
        """What the pyiceberg ``table`` (``name`` in the catalog) records of this connector's offsets."""
        return recorded_in(PyIcebergTable(table), self.branch(name), self.group_id)


def read_table_offsets(scope: RecordingTables, tables: list[str]) -> dict[str, Recorded]:
    return {name: scope.recorded(scope.open(name), name) for name in tables}


def connect_document(by_table: dict[str, Recorded]) -> dict[str, Any]:
    """KIP-875's sink shape: ``{"offsets": [{"partition": {...}, "offset": {"kafka_offset": n}}]}``."""
    lowest = tables_resume(by_table)
    return {"offsets": [{"partition": {"kafka_topic": topic, "kafka_partition": partition},
                         "offset": {"kafka_offset": offset}}
                        for (topic, partition), offset in sorted(lowest.items())]}
