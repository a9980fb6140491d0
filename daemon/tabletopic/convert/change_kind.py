"""Which change each record is, for keyed tables: an upsert of its row or a delete of its key.

With ``iceberg.tables.cdc-field`` the field's value decides: ``I``/``U`` (and Debezium's
``c``, ``r``, ``u``) upsert, ``D`` (``d``) deletes.  Without it, upsert mode treats every
record as an upsert.  Tombstones (a null value with a key) are deletes; they are made
from the record key in :mod:`tabletopic.convert.key_rows`.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tabletopic.convert.converter import Failure
from tabletopic.convert.field_path import read_path
from tabletopic.convert.records import DELETE, UPSERT, SinkRecords

_UPSERTS = ["I", "U", "C", "R"]
_DELETES = ["D"]


class ChangeKinds:
    def __init__(self, cdc_field: str | None, case_insensitive: bool) -> None:
        self._path = cdc_field.split(".") if cdc_field else None
        self._case_insensitive = case_insensitive

    def classify(self, records: SinkRecords) -> tuple[SinkRecords, list[Failure]]:
        if self._path is None:
            return records.with_ops(np.full(len(records), UPSERT, dtype=np.int8)), []
        values = read_path(records.value, self._path, self._case_insensitive)
        field = ".".join(self._path)
        if values is None:
            return records.take(np.zeros(len(records), dtype=bool)), [
                Failure(int(r), f"cdc field {field!r} is not in the record") for r in records.rows]
        if pa.types.is_nested(values.type):
            return records.take(np.zeros(len(records), dtype=bool)), [
                Failure(int(r), f"cdc field {field!r} must be a string (I, U or D), got a {values.type}")
                for r in records.rows]
        upper = pc.utf8_upper(pc.cast(values, pa.string()))
        is_upsert = np.asarray(pc.fill_null(pc.is_in(upper, pa.array(_UPSERTS)), False)
                               .to_numpy(zero_copy_only=False), dtype=bool)
        is_delete = np.asarray(pc.fill_null(pc.is_in(upper, pa.array(_DELETES)), False)
                               .to_numpy(zero_copy_only=False), dtype=bool)
        known = is_upsert | is_delete
        failures = [Failure(int(r), f"cdc field {field!r} must be I, U or D (or c, r, u, d), got {v!r}")
                    for r, v in zip(records.rows[~known], pc.filter(values, pa.array(~known)).to_pylist(),
                                    strict=True)]
        ops = np.where(is_delete, DELETE, UPSERT).astype(np.int8)
        kept = records.with_ops(ops)
        return (kept if known.all() else kept.take(known)), failures
