"""The Iceberg Kafka Connect sink's own small transforms: ``CopyValue``, ``DmsTransform``, ``KafkaMetadataTransform``.

Registered under their ``org.apache.iceberg.connect.transforms`` class names. As the Iceberg sink's:

* CopyValue: ``target.field`` gets ``source.field``'s value. A struct without the source field, or with the
  target field already, fails the record; schemaless, a missing source gives nothing and the target is
  overwritten.
* DmsTransform: an AWS DMS record (schemaless ``data`` and ``metadata`` objects) becomes ``data``'s fields
  and a ``_cdc`` struct: ``op`` (I, U for ``update``, D for ``delete``), ``ts`` (``metadata.timestamp`` as
  it is) and ``source`` (``schema-name.table-name``). A record without both objects is dropped; a record
  with a schema fails ("Schema not support for DMS records").
* KafkaMetadataTransform: the record's topic, partition, offset and timestamp (epoch milliseconds) in a
  struct ``field_name`` (``nested=true``) or as top-level fields ``<field_name>_topic`` and so on;
  ``external_field=key,value`` adds a constant string. ``field_name`` is ``_kafka_metadata`` by default.

A null value passes each unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tabletopic.convert.records import SinkRecords
from tabletopic.transform.chain import every_record
from tabletopic_plugins.transforms.connect_record import (
    VALUE,
    constant,
    flag,
    is_primitive,
    operand,
    required,
    required_struct,
    table_of_struct,
    text,
)

_DMS_OPS = {"update": "U", "delete": "D"}


class CopyValue:
    keys = frozenset(("source.field", "target.field"))

    def configure(self, props: Mapping[str, str]) -> None:
        self.source = required(props, "source.field")
        self.target = required(props, "target.field")

    def apply(self, records: SinkRecords) -> SinkRecords:
        table = operand(records, VALUE)
        if table is None:
            return records
        if is_primitive(records, VALUE):
            raise every_record(records, required_struct(records, VALUE, "copy value"))
        at = table.schema.get_field_index(self.source)
        target = table.schema.get_field_index(self.target)
        if not records.schemaless:
            if at < 0:
                raise every_record(records, f"{self.source} is not a valid field name")
            if target >= 0:
                raise every_record(records, f"Cannot create field because of field name duplication {self.target}")
        if at < 0:
            return records
        column = table.column(at)
        table = table.set_column(target, self.target, column) if target >= 0 else table.append_column(self.target,
                                                                                                       column)
        return records.with_value(table)


class DmsTransform:
    keys: frozenset[str] = frozenset()

    def configure(self, props: Mapping[str, str]) -> None:
        pass

    def apply(self, records: SinkRecords) -> list[SinkRecords] | SinkRecords:
        table = operand(records, VALUE)
        if table is None:
            return records
        if not records.schemaless:
            raise every_record(records, "Schema not support for DMS records")
        if is_primitive(records, VALUE):
            raise every_record(records, required_struct(records, VALUE, "DMS transform"))
        names = table.column_names
        if "data" not in names or "metadata" not in names:
            return []
        data, metadata = table.column("data").combine_chunks(), table.column("metadata").combine_chunks()
        if not pa.types.is_struct(data.type) or not pa.types.is_struct(metadata.type):
            return []
        keep = np.asarray(pc.and_(data.is_valid(), metadata.is_valid()).to_numpy(zero_copy_only=False), dtype=bool)
        if not keep.any():
            return []
        if not keep.all():
            records, data, metadata = records.take(keep), data.filter(pa.array(keep)), metadata.filter(pa.array(keep))
        n = len(records)
        fields = {metadata.type.field(i).name for i in range(metadata.type.num_fields)}

        def meta(name: str) -> pa.Array:
            return pc.struct_field(metadata, name) if name in fields else pa.nulls(n, pa.string())

        operation = meta("operation")
        if operation.null_count:
            raise every_record(records, "a DMS record's metadata has no operation")
        operation = pc.cast(operation, pa.string())
        op = constant("I", n, pa.string())
        for dms, code in _DMS_OPS.items():
            op = pc.if_else(pc.equal(operation, dms), code, op)
        source = pc.binary_join_element_wise(_java_strings(meta("schema-name")), _java_strings(meta("table-name")), ".")
        cdc = pa.StructArray.from_arrays([op, meta("timestamp"), source], names=["op", "ts", "source"])
        rows = table_of_struct(data)
        return records.with_value(rows.append_column("_cdc", cdc) if "_cdc" not in rows.column_names
                                  else rows.set_column(rows.schema.get_field_index("_cdc"), "_cdc", cdc))


def _java_strings(column: pa.Array) -> pa.Array:
    """``String.format("%s", v)``: null prints as ``null``."""
    as_text = column if pa.types.is_string(column.type) else pc.cast(column, pa.string())
    return pc.fill_null(as_text, "null")


class KafkaMetadataTransform:
    keys = frozenset(("field_name", "nested", "external_field"))

    def configure(self, props: Mapping[str, str]) -> None:
        self.name = text(props, "field_name", "_kafka_metadata") or ""
        self.nested = flag(props, "nested", False)
        external = text(props, "external_field")
        self.external: tuple[str, str] | None = None
        if external is not None:
            parts = external.split(",")
            if len(parts) != 2:
                raise ValueError(f"Could not parse {external} for external_field")
            self.external = (parts[0], parts[1])

    def apply(self, records: SinkRecords) -> SinkRecords:
        table = operand(records, VALUE)
        if table is None:
            return records
        if is_primitive(records, VALUE):
            raise every_record(records, required_struct(records, VALUE, "KafkaMetadataTransform"))
        n = len(records)
        values = [("topic", constant(records.record_topic, n, pa.string())),
                  ("partition", constant(records.partition, n, pa.int32())),
                  ("offset", pa.array(records.offsets, pa.int64())),
                  ("timestamp", pa.array(records.timestamps, pa.int64()))]
        if self.external is not None:
            values.append((self.external[0], constant(self.external[1], n, pa.string())))
        if self.nested:
            added = [(self.name, pa.StructArray.from_arrays([v for _, v in values], names=[k for k, _ in values]))]
        else:
            added = [(f"{self.name}_{k}", v) for k, v in values]
        for name, column in added:
            at = table.schema.get_field_index(name)
            if at >= 0 and not records.schemaless:
                raise every_record(records, f"Cannot create field because of field name duplication {name}")
            table = table.set_column(at, name, column) if at >= 0 else table.append_column(name, column)
        return records.with_value(table)
