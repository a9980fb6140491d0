"""``org.apache.kafka.connect.transforms.InsertField$Value``: add Kafka metadata or a static value as columns."""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa

from tabletopic.convert.records import SinkRecords


def _name(spec: str | None) -> str | None:
    # Connect marks an optional field with a trailing "?" and a required one with "!".
    return spec.rstrip("?!") if spec else None


class InsertFieldValue:
    def configure(self, props: Mapping[str, str]) -> None:
        self.topic = _name(props.get("topic.field"))
        self.partition = _name(props.get("partition.field"))
        self.offset = _name(props.get("offset.field"))
        self.timestamp = _name(props.get("timestamp.field"))
        self.static = _name(props.get("static.field"))
        self.static_value = props.get("static.value")
        if not any((self.topic, self.partition, self.offset, self.timestamp, self.static)):
            raise ValueError("InsertField$Value needs at least one of topic.field, partition.field, "
                             "offset.field, timestamp.field, static.field")

    def apply(self, records: SinkRecords) -> SinkRecords:
        table, n = records.value, len(records)
        if self.topic:
            table = table.append_column(self.topic, pa.array([records.topic] * n, pa.string()))
        if self.partition:
            table = table.append_column(self.partition, pa.array([records.partition] * n, pa.int32()))
        if self.offset:
            table = table.append_column(self.offset, pa.array(records.offsets, pa.int64()))
        if self.timestamp:
            ts = pa.array(records.timestamps, pa.int64()).cast(pa.timestamp("ms", tz="UTC"))
            table = table.append_column(self.timestamp, ts.cast(pa.timestamp("us", tz="UTC")))
        if self.static:
            table = table.append_column(self.static, pa.array([self.static_value] * n, pa.string()))
        return records.with_value(table)
