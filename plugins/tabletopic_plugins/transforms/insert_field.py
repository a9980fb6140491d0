"""``org.apache.kafka.connect.transforms.InsertField$Key`` and ``$Value``: the record's topic, partition,
offset, timestamp or a static string as new fields.

As Connect's: ``?`` or ``!`` at the end of a field name marks it optional or required (the name leaves it
out); a null side passes unchanged; the timestamp is a Timestamp with a schema and epoch milliseconds (a
long) without; the topic is the record's as the transforms before left it. A field that is there already
is replaced in a schemaless value and refused in a struct, whose schema cannot hold a name twice.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa

from tabletopic.convert.records import SinkRecords
from tabletopic.transform.chain import every_record
from tabletopic_plugins.transforms.connect_record import (
    KEY,
    REPLACE_NULL_WITH_DEFAULT,
    Sided,
    constant,
    is_primitive,
    operand,
    replace_null_with_default,
    required_struct,
    text,
    with_operand,
)

_FIELDS = ("topic.field", "partition.field", "offset.field", "timestamp.field", "static.field")


def _name(spec: str | None) -> str | None:
    if spec is None:
        return None
    return spec[:-1] if spec.endswith(("?", "!")) else spec


class InsertField(Sided):
    keys = frozenset((*_FIELDS, "static.value", REPLACE_NULL_WITH_DEFAULT))

    def configure(self, props: Mapping[str, str]) -> None:
        self.topic, self.partition, self.offset, self.timestamp, self.static = (
            _name(text(props, key)) for key in _FIELDS)
        self.static_value = text(props, "static.value")
        replace_null_with_default(props)
        if all(props.get(key) is None for key in _FIELDS):
            raise ValueError("No field insertion configured")
        if self.static is not None and self.static_value is None:
            raise ValueError(f"static.value: No value specified for static field: {props.get('static.field')}")

    def apply(self, records: SinkRecords) -> SinkRecords:
        table = operand(records, self.side)
        if table is None:
            return records
        if is_primitive(records, self.side):
            raise every_record(records, required_struct(records, self.side, "field insertion"))
        n = len(records)
        added: list[tuple[str, pa.Array]] = []
        if self.topic is not None:
            added.append((self.topic, constant(records.record_topic, n, pa.string())))
        if self.partition is not None:
            added.append((self.partition, constant(records.partition, n, pa.int32())))
        if self.offset is not None:
            added.append((self.offset, pa.array(records.offsets, pa.int64())))
        if self.timestamp is not None:
            millis = pa.array(np.asarray(records.timestamps, dtype=np.int64), pa.int64())
            added.append((self.timestamp, millis if records.schemaless else
                          millis.cast(pa.timestamp("ms", tz="UTC")).cast(pa.timestamp("us", tz="UTC"))))
        if self.static is not None:
            added.append((self.static, constant(self.static_value, n, pa.string())))
        for name, column in added:
            at = table.schema.get_field_index(name)
            if at < 0:
                table = table.append_column(name, column)
            elif records.schemaless:
                table = table.set_column(at, name, column)
            else:
                raise every_record(records, f"Cannot create field because of field name duplication {name}")
        return with_operand(records, self.side, table, False)


class InsertFieldKey(InsertField):
    side = KEY


class InsertFieldValue(InsertField):
    pass
