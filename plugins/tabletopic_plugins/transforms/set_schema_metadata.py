"""``org.apache.kafka.connect.transforms.SetSchemaMetadata$Key`` and ``$Value``: the schema's name and version.

Iceberg tables keep neither, so a record's rows are unchanged. As Connect's, a side without a schema (a
schemaless value) fails the record, and a null side without one passes.
"""

from __future__ import annotations

from collections.abc import Mapping

from tabletopic.convert.records import SinkRecords
from tabletopic.transform.chain import every_record
from tabletopic_plugins.transforms.connect_record import (
    KEY,
    REPLACE_NULL_WITH_DEFAULT,
    Sided,
    integer,
    operand,
    replace_null_with_default,
    text,
)


class SetSchemaMetadata(Sided):
    keys = frozenset(("schema.name", "schema.version", REPLACE_NULL_WITH_DEFAULT))

    def configure(self, props: Mapping[str, str]) -> None:
        self.name = text(props, "schema.name")
        self.version = integer(props, "schema.version")
        replace_null_with_default(props)
        if self.name is None and self.version is None:
            raise ValueError("Neither schema name nor version configured")

    def apply(self, records: SinkRecords) -> SinkRecords:
        if operand(records, self.side) is not None and records.schemaless:
            raise every_record(records, "Schema required for [updating schema metadata]")
        return records


class SetSchemaMetadataKey(SetSchemaMetadata):
    side = KEY


class SetSchemaMetadataValue(SetSchemaMetadata):
    pass
