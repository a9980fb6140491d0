"""``io.debezium.transforms.ExtractNewRecordState``: a Debezium change event becomes the row it leaves.

As Debezium's (3.x):

* An event (a value with ``op`` and ``before``/``after`` images) becomes its ``after`` image. A value that is
  no such envelope passes unchanged, and so does every schemaless value: Debezium's SMT reads the envelope
  from the schema alone.
* ``delete.tombstone.handling.mode`` says what becomes of deletes and tombstones:

  =======================  =================================  ===================
  mode                     delete event                       tombstone
  =======================  =================================  ===================
  ``tombstone`` (default)  a tombstone (null value)           dropped
  ``drop``                 dropped                            dropped
  ``rewrite``              ``before`` + ``__deleted=true``    dropped
  ``rewrite-with-tombstone`` ``before`` + ``__deleted=true``  kept
  ``delete-to-tombstone``  a tombstone                        dropped
  =======================  =================================  ===================

  In both rewrite modes the other events get ``__deleted=false``. Without that key, the older
  ``delete.handling.mode`` (``drop`` by default, ``none``: a tombstone, ``rewrite``) and
  ``drop.tombstones`` (true by default) apply when either is set.
* Events without either image (truncate, messages) are dropped.
* ``add.fields`` adds fields of the envelope (``op``, ``ts_ms``), of ``source`` (the default: ``table``,
  ``lsn``, ...) or of ``transaction`` (``id``, ...), or ``struct.field``, named ``add.fields.prefix``
  (``__``) + the field (``__source_ts_ms`` when qualified), or the name after ``:``. A field the event
  does not have is not added. Deletes rewritten get them too; tombstones do not.
* ``add.headers`` (with ``add.headers.prefix``) does the same into headers; a tombstone gets only
  ``op``, as ``d``.
* ``route.by.field``: the new topic is that field of the row (of ``before`` for a delete); a null or blank
  value leaves the topic.

``drop.fields.header.name`` is not supported and refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tabletopic.convert.records import SinkRecords
from tabletopic.transform.chain import every_record
from tabletopic_plugins.transforms.connect_record import (
    REPLACE_NULL_WITH_DEFAULT,
    constant,
    flag,
    items,
    operand,
    replace_null_with_default,
    table_of_struct,
    text,
)

MODES = ("drop", "tombstone", "rewrite", "rewrite-with-tombstone", "delete-to-tombstone")
LEGACY_DELETE_MODES = ("drop", "none", "rewrite")
_ENVELOPE_FIELDS = {"op", "ts_ms", "ts_us", "ts_ns"}
_TRANSACTION_FIELDS = {"id", "data_collection_order", "total_order"}
DELETED_FIELD = "__deleted"


@dataclass(frozen=True)
class FieldReference:
    """A field of the envelope to add: where it is (``struct`` None: the envelope itself) and its new name."""

    struct: str | None
    field: str
    name: str

    @classmethod
    def parse(cls, prefix: str, spec: str) -> FieldReference:
        parts = spec.split(":")
        if len(parts) > 2:
            raise ValueError(f"Unexpected field name: {spec}")
        path = parts[0].split(".")
        field = path[0] if len(path) == 1 else path[1]
        if len(path) == 1:
            struct = None if field in _ENVELOPE_FIELDS else "transaction" if field in _TRANSACTION_FIELDS else \
                "updateDescription" if field == "updateDescription" else "source"
        else:
            struct = path[0]
        qualified = field if len(path) == 1 else f"{struct}_{field}"
        name = prefix + (parts[1] if len(parts) == 2 else qualified)
        return cls(struct, field, name)

    def column(self, envelope: pa.Table) -> pa.Array | None:
        """The field's values in each event; None where the event's schema has no such field."""
        names = envelope.column_names
        if self.struct is not None and self.struct in names:
            parent = envelope.column(self.struct).combine_chunks()
            if pa.types.is_struct(parent.type) and parent.type.get_field_index(self.field) >= 0:
                return pc.struct_field(parent, self.field)
        elif self.struct is not None and self.field not in names:
            return None
        if self.field in names:
            return envelope.column(self.field).combine_chunks()
        return None


class ExtractNewRecordState:
    keys = frozenset(("delete.tombstone.handling.mode", "delete.handling.mode", "drop.tombstones",
                      "route.by.field", "add.fields", "add.fields.prefix", "add.headers", "add.headers.prefix",
                      "drop.fields.header.name", "drop.fields.from.key", "drop.fields.keep.schema.compatible",
                      REPLACE_NULL_WITH_DEFAULT))
    takes_tombstones = True

    def configure(self, props: Mapping[str, str]) -> None:
        mode = (text(props, "delete.tombstone.handling.mode") or "").strip().lower()
        legacy = "delete.handling.mode" in props or "drop.tombstones" in props
        if mode:
            if mode not in MODES:
                raise ValueError(f"delete.tombstone.handling.mode={mode!r}: must be one of {', '.join(MODES)}")
            self.delete_mode = {"drop": "drop", "tombstone": "tombstone", "delete-to-tombstone": "tombstone"}.get(
                mode, "rewrite")
            self.keep_tombstones = mode == "rewrite-with-tombstone"
        elif legacy:
            old = (text(props, "delete.handling.mode") or "drop").strip().lower()
            if old not in LEGACY_DELETE_MODES:
                raise ValueError(f"delete.handling.mode={old!r}: must be one of {', '.join(LEGACY_DELETE_MODES)}")
            self.delete_mode = {"none": "tombstone"}.get(old, old)
            self.keep_tombstones = not flag(props, "drop.tombstones", True)
        else:
            self.delete_mode, self.keep_tombstones = "tombstone", False
        self.route_field = (text(props, "route.by.field") or "") or None
        self.fields = [FieldReference.parse(text(props, "add.fields.prefix", "__") or "", f)
                       for f in items(props, "add.fields")]
        self.headers = [FieldReference.parse(text(props, "add.headers.prefix", "__") or "", f)
                        for f in items(props, "add.headers")]
        if (text(props, "drop.fields.header.name") or "").strip():
            raise ValueError("drop.fields.header.name is not supported here: the sink does not read the header's "
                             "list of fields; drop them with ReplaceField instead")
        replace_null_with_default(props)

    @property
    def needs_headers(self) -> bool:
        return bool(self.headers)

    @property
    def changes_topic(self) -> bool:
        return self.route_field is not None

    def apply(self, records: SinkRecords) -> list[SinkRecords] | SinkRecords:
        if records.tombstone:
            if self.headers and any(h.field == "op" for h in self.headers):
                records = self._add_headers(records, None)
            return [records] if self.keep_tombstones else []
        envelope = operand(records, "value")
        if envelope is None or records.schemaless or records.primitive or not _is_envelope(envelope):
            return records
        if self.headers:
            records = self._add_headers(records, envelope)
        after, before = _image(envelope, "after"), _image(envelope, "before")
        has_after = _valid(after, len(records))
        has_before = _valid(before, len(records))
        out: list[SinkRecords] = []
        upserts = has_after
        deletes = ~has_after & has_before
        if upserts.any():
            assert after is not None
            out += self._rows(records, envelope, after, upserts, "false")
        if deletes.any():
            if self.delete_mode == "rewrite":
                assert before is not None
                out += self._rows(records, envelope, before, deletes, "true")
            elif self.delete_mode == "tombstone":
                tombstones = records.take(deletes).as_tombstones()
                out += self._routed(tombstones, before.filter(pa.array(deletes)) if before is not None else None)
        return out

    def _rows(self, records: SinkRecords, envelope: pa.Table, image: pa.StructArray, mask: np.ndarray,
              deleted: str) -> list[SinkRecords]:
        keep = pa.array(mask)
        part = records if mask.all() else records.take(mask)
        rows = table_of_struct(image.filter(keep))
        if self.delete_mode == "rewrite":
            rows = _add(part, rows, DELETED_FIELD, constant(deleted, len(part), pa.string()))
        subset = envelope if mask.all() else envelope.filter(keep)
        for reference in self.fields:
            column = reference.column(subset)
            if column is not None:
                rows = _add(part, rows, reference.name, column)
        return self._routed(part.with_value(rows), image.filter(keep))

    def _routed(self, records: SinkRecords, image: pa.StructArray | None) -> list[SinkRecords]:
        if self.route_field is None or image is None:
            return [records]
        if image.type.get_field_index(self.route_field) < 0:
            raise every_record(records, f"{self.route_field} is not a valid field name")
        values = pc.struct_field(image, self.route_field)
        if not (pa.types.is_string(values.type) or pa.types.is_null(values.type)):
            raise every_record(records, f"Field '{self.route_field}' is not of type STRING")
        topics = values.cast(pa.string())
        blank = pc.or_(pc.is_null(topics), pc.equal(pc.utf8_trim_whitespace(pc.fill_null(topics, "")), ""))
        topics = pc.if_else(blank, records.record_topic, topics)
        out = []
        for topic in pc.unique(topics).to_pylist():
            mask = np.asarray(pc.equal(topics, topic).to_numpy(zero_copy_only=False), dtype=bool)
            out.append((records if mask.all() else records.take(mask)).with_topic(topic))
        return out

    def _add_headers(self, records: SinkRecords, envelope: pa.Table | None) -> SinkRecords:
        rows = records.headers if records.headers is not None else [[] for _ in range(len(records))]
        if envelope is None:
            named = [r.name for r in self.headers if r.field == "op"]
            return records.with_headers([[*row, *((name, "d") for name in named)] for row in rows])
        found = [(r.name, column.to_pylist()) for r in self.headers
                 if (column := r.column(envelope)) is not None]
        return records.with_headers([[*row, *((name, values[i]) for name, values in found)]
                                     for i, row in enumerate(rows)])


def _is_envelope(table: pa.Table) -> bool:
    names = set(table.column_names)
    if "op" not in names or not ({"before", "after"} & names):
        return False
    return all(pa.types.is_struct(table.column(n).type) or pa.types.is_null(table.column(n).type)
               for n in ("before", "after") if n in names)


def _image(envelope: pa.Table, name: str) -> pa.StructArray | None:
    if name not in envelope.column_names:
        return None
    column = envelope.column(name).combine_chunks()
    return column if pa.types.is_struct(column.type) else None


def _valid(image: pa.StructArray | None, n: int) -> np.ndarray:
    if image is None:
        return np.zeros(n, dtype=bool)
    return np.asarray(image.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def _add(records: SinkRecords, rows: pa.Table, name: str, column: pa.Array) -> pa.Table:
    if rows.schema.get_field_index(name) >= 0:
        raise every_record(records, f"Cannot create field because of field name duplication {name}")
    return rows.append_column(name, column)
