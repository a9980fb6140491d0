"""``org.apache.iceberg.connect.transforms.DebeziumTransform``: Debezium change events to rows with a ``_cdc``
struct, as the Iceberg sink's transform makes them.

Also registered as ``tabletopic.transforms.DebeziumTransform``. Each event's ``after`` image (``before`` for
a delete) becomes the row, with::

    _cdc: struct<op, ts, offset, source, target[, key]>

* ``op``: U for Debezium's ``u``, D for ``d``, I for anything else (``c``, ``r``), ready for
  ``iceberg.tables.cdc-field=_cdc.op``.
* ``ts``: the event's ``ts_ms``, a timestamp (a long, schemaless).
* ``offset``: the record's Kafka offset.
* ``source``: ``<db>.<table>`` from the ``source`` block, where ``schema`` stands in for ``db`` if it is
  there (PostgreSQL); ``target``: ``cdc.target.pattern`` with ``{db}`` and ``{table}`` filled in (by
  default the same as ``source``), ready for ``iceberg.tables.route-field=_cdc.target``.
* ``key``: the record's key, where it has one (schemaless: where it is an object).

As the Iceberg sink's: a null value passes; schemaless, an event with neither image (a truncate, a message)
is dropped; an event without the image its op needs fails (with a schema always, as the Iceberg sink's).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tabletopic.convert.records import SinkRecords
from tabletopic.transform.chain import RowsFailed, every_record
from tabletopic_plugins.transforms.connect_record import (
    KEY,
    VALUE,
    constant,
    is_primitive,
    operand,
    required_struct,
    struct_from,
    table_of_struct,
    text,
)


class DebeziumTransform:
    keys = frozenset(("cdc.target.pattern",))
    needs_key = True

    def configure(self, props: Mapping[str, str]) -> None:
        self.pattern = text(props, "cdc.target.pattern") or None

    def apply(self, records: SinkRecords) -> list[SinkRecords] | SinkRecords:
        table = operand(records, VALUE)
        if table is None:
            return records
        if is_primitive(records, VALUE):
            raise every_record(records, required_struct(records, VALUE, "Debezium transform"))
        names = table.column_names
        if "op" not in names:
            raise every_record(records, "a Debezium event needs an op field")
        op = table.column("op").combine_chunks()
        if op.null_count:
            bad = np.asarray(op.is_null().to_numpy(zero_copy_only=False), dtype=bool)
            raise RowsFailed(bad, "a Debezium event's op is null")
        op = pc.cast(op, pa.string())
        kinds = pc.if_else(pc.equal(op, "u"), "U", pc.if_else(pc.equal(op, "d"), "D", "I"))
        delete = np.asarray(pc.equal(kinds, "D").to_numpy(zero_copy_only=False), dtype=bool)
        images = [self._image(table, "before"), self._image(table, "after")]
        present = np.zeros(len(records), dtype=bool)  # the image its op needs
        some = np.zeros(len(records), dtype=bool)  # either image
        for image, rows in zip(images, (delete, ~delete), strict=True):
            if image is not None:
                valid = np.asarray(image.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
                present |= rows & valid
                some |= valid
        if not present.all():
            # Schemaless, the Iceberg sink drops an event without its image: a truncate or a message carries
            # none. An event that has the other image is malformed, and fails rather than vanish.
            wrong = ~present if not records.schemaless else ~present & some
            if wrong.any():
                raise RowsFailed(wrong, "a Debezium event has no before image for a delete, or no after image")
            if not present.any():
                return []
            keep = pa.array(present)
            records, table, kinds, delete = (records.take(present), table.filter(keep), kinds.filter(keep),
                                             delete[present])
            images = [self._image(table, "before"), self._image(table, "after")]
        cdc = self._cdc(records, table, kinds)
        return [part.with_value(part.value.append_column("_cdc", cdc.filter(pa.array(mask))))
                for part, mask in self._rows(records, images, delete)]

    @staticmethod
    def _image(table: pa.Table, name: str) -> pa.StructArray | None:
        if name not in table.column_names:
            return None
        column = table.column(name).combine_chunks()
        if pa.types.is_null(column.type):
            return None
        if not pa.types.is_struct(column.type):
            raise ValueError(f"a Debezium event's {name} image must be an object, not {column.type}")
        return column

    @staticmethod
    def _rows(records: SinkRecords, images: list[pa.StructArray | None],
              delete: np.ndarray) -> list[tuple[SinkRecords, np.ndarray]]:
        out = []
        for image, mask in zip(images, (delete, ~delete), strict=True):
            if image is None or not mask.any():
                continue
            part = records if mask.all() else records.take(mask)
            out.append((part.with_value(table_of_struct(image.filter(pa.array(mask)))), mask))
        return out

    def _cdc(self, records: SinkRecords, table: pa.Table, kinds: pa.Array) -> pa.StructArray:
        n = len(records)
        if "source" not in table.column_names:
            raise every_record(records, "a Debezium event needs a source block")
        source = table.column("source").combine_chunks()
        if not pa.types.is_struct(source.type):
            raise every_record(records, f"a Debezium event's source must be an object, not {source.type}")
        fields = {source.type.field(i).name for i in range(source.type.num_fields)}

        def part(name: str) -> pa.Array:
            if name not in fields:
                return constant("null", n, pa.string())
            return pc.fill_null(pc.cast(pc.struct_field(source, name), pa.string()), "null")

        db = part("schema") if "schema" in fields else part("db")
        table_name = part("table")
        source_name = pc.binary_join_element_wise(db, table_name, ".")
        target = source_name if not self.pattern else self._target(db, table_name, n)
        if "ts_ms" in table.column_names:
            ts = table.column("ts_ms").combine_chunks()
            if pa.types.is_floating(ts.type):
                ts = pc.cast(ts, pa.int64())
        else:
            ts = pa.nulls(n, pa.int64())
        if not records.schemaless:
            ts = pc.cast(pc.cast(ts, pa.timestamp("ms", tz="UTC")), pa.timestamp("us", tz="UTC"))
        arrays = [kinds, ts, pa.array(records.offsets, pa.int64()), source_name, target]
        names = ["op", "ts", "offset", "source", "target"]
        key = operand(records, KEY)
        if key is not None and not (records.schemaless and records.key_primitive):
            arrays.append(key.column(0).combine_chunks() if records.key_primitive else struct_from(key))
            names.append("key")
        return pa.StructArray.from_arrays(arrays, names=names)

    def _target(self, db: pa.Array, table: pa.Array, n: int) -> pa.Array:
        assert self.pattern is not None
        pieces: list[pa.Array] = []
        rest = self.pattern
        while rest:
            at_db, at_table = rest.find("{db}"), rest.find("{table}")
            found = [(i, token) for i, token in ((at_db, "{db}"), (at_table, "{table}")) if i >= 0]
            if not found:
                pieces.append(constant(rest, n, pa.string()))
                break
            i, token = min(found)
            if i:
                pieces.append(constant(rest[:i], n, pa.string()))
            pieces.append(db if token == "{db}" else table)
            rest = rest[i + len(token):]
        if not pieces:
            return constant("", n, pa.string())
        return pieces[0] if len(pieces) == 1 else pc.binary_join_element_wise(*pieces, "")
