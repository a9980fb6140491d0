"""Unwrap Debezium change events into rows with a ``_cdc`` struct, as the Iceberg connector's transform does.

Registered as ``org.apache.iceberg.connect.transforms.DebeziumTransform`` (the Iceberg
connector's name) and ``tabletopic.transforms.DebeziumTransform``.

Input rows carry Debezium's envelope: ``before``, ``after``, ``op``, ``source``, ``ts_ms``.
Output rows are the ``after`` image (the ``before`` image for deletes) plus::

    _cdc: struct<op: string, ts: timestamptz, source: string, target: string>

``op`` is I (Debezium's c and r, the snapshot read), U (u) or D (d), ready for
``iceberg.tables.cdc-field=_cdc.op``.  ``source`` is ``<db or schema>.<table>`` from the
event's source block; ``target`` is ``cdc.target.pattern`` with ``{db}``, ``{schema}`` and
``{table}`` filled in (default ``{db}.{table}``), ready for dynamic routing with
``iceberg.tables.route-field=_cdc.target``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tabletopic.convert.records import SinkRecords

_OPS = {"c": "I", "r": "I", "u": "U", "d": "D"}
_PLACEHOLDER = re.compile(r"\{(db|schema|table)\}")


class DebeziumTransform:
    def configure(self, props: Mapping[str, str]) -> None:
        self.pattern = props.get("cdc.target.pattern", "{db}.{table}")

    def apply(self, records: SinkRecords) -> SinkRecords:
        table = records.value
        missing = [c for c in ("op", "source") if c not in table.column_names]
        if missing or ("after" not in table.column_names and "before" not in table.column_names):
            raise ValueError(f"not a Debezium change event: missing {missing or ['before/after']}")
        op = pc.cast(table.column("op").combine_chunks(), pa.string())
        kinds = pa.nulls(len(op), pa.string())
        for debezium, kind in _OPS.items():
            kinds = pc.if_else(pc.fill_null(pc.equal(op, debezium), False), kind, kinds)
        unknown = np.asarray(kinds.is_null().to_numpy(zero_copy_only=False), dtype=bool)
        if unknown.any():
            bad = sorted({str(v) for v in pc.filter(op, pa.array(unknown)).to_pylist()})
            raise ValueError(f"unknown Debezium op {bad}; expected c, r, u or d")
        image = self._image(table, np.asarray(pc.equal(kinds, "D").to_numpy(zero_copy_only=False), dtype=bool))
        source = table.column("source").combine_chunks()
        parts = {name: self._source_field(source, name) for name in ("db", "schema", "table")}
        owner = parts["db"] if parts["db"] is not None else parts["schema"]
        source_name = pc.binary_join_element_wise(owner, parts["table"], ".") if owner is not None \
            else parts["table"]
        ts = table.column("ts_ms").combine_chunks() if "ts_ms" in table.column_names else \
            pa.array(records.timestamps, pa.int64())
        if pa.types.is_floating(ts.type):  # a batch with a fractional ts_ms elsewhere; whole ones still fit
            ts = pc.cast(ts, pa.int64())
        cdc = pa.StructArray.from_arrays(
            [kinds, pc.cast(pc.cast(ts, pa.timestamp("ms", tz="UTC")), pa.timestamp("us", tz="UTC")),
             source_name, self._target(parts, len(table))],
            names=["op", "ts", "source", "target"])
        return records.with_value(image.append_column("_cdc", cdc))

    @staticmethod
    def _image(table: pa.Table, is_delete: np.ndarray) -> pa.Table:
        """The row each event leaves: ``after``, or ``before`` for a delete, field by field by name (the
        two images may list their fields in different orders, or one may lack a field)."""
        after, before = _image_column(table, "after"), _image_column(table, "before")
        base = after if after is not None else before
        if base is None:
            raise ValueError("a Debezium event needs a before or an after image; both are null")
        names = [base.type.field(i).name for i in range(base.type.num_fields)]
        if base is after and before is not None:
            names += [before.type.field(i).name for i in range(before.type.num_fields)
                      if before.type.field(i).name not in names]
        if not names:
            raise ValueError("a Debezium event's image has no fields")
        columns = []
        mask = pa.array(is_delete)
        for name in names:
            new = after.field(name) if after is not None and after.type.get_field_index(name) >= 0 else None
            old = before.field(name) if before is not None and before.type.get_field_index(name) >= 0 else None
            if new is None:
                columns.append(old if old is not None else pa.nulls(len(table)))
            elif old is None or not is_delete.any():
                columns.append(new)
            else:
                columns.append(pc.if_else(mask, old, new))
        return pa.Table.from_arrays(columns, names=names)

    @staticmethod
    def _source_field(source: pa.Array, name: str) -> pa.Array | None:
        if not pa.types.is_struct(source.type):
            raise ValueError(f"a Debezium event's source must be an object, not {source.type}")
        fields = [source.type.field(i).name for i in range(source.type.num_fields)]
        return pc.cast(pc.struct_field(source, name), pa.string()) if name in fields else None

    def _target(self, parts: dict[str, pa.Array | None], n: int) -> pa.Array:
        pieces: list[pa.Array | str] = []
        last = 0
        for match in _PLACEHOLDER.finditer(self.pattern):
            if match.start() > last:
                pieces.append(self.pattern[last:match.start()])
            value = parts[match.group(1)]
            pieces.append(value if value is not None else pa.nulls(n, pa.string()))
            last = match.end()
        if last < len(self.pattern):
            pieces.append(self.pattern[last:])
        arrays = [p if isinstance(p, pa.Array) else pa.array([p] * n, pa.string()) for p in pieces]
        if len(arrays) == 1:
            return arrays[0]
        return pc.binary_join_element_wise(*arrays, "")


def _image_column(table: pa.Table, name: str) -> pa.StructArray | None:
    """The ``before`` or ``after`` image, or None where the batch has none (absent, or null in every event)."""
    if name not in table.column_names:
        return None
    column = table.column(name).combine_chunks()
    if column.null_count == len(column):  # of any type: the batch it was read with may have widened it
        return None
    if not pa.types.is_struct(column.type):
        raise ValueError(f"a Debezium event's {name} image must be an object, not {column.type}")
    return column
