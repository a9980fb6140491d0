"""Tombstones to deletes: a record with a key and a null value deletes the row with that key.

The key is converted with the connector's key converter: a Connect key schema or JSON
gives columns by name; a string or bytes key (one ``value`` column) stands for the single
id column.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np
import pyarrow as pa

from tabletopic.convert.converter import ConvertResult, Failure
from tabletopic.convert.records import DELETE, RawRecords, SinkRecords, no_columns


def tombstone_deletes(raw: RawRecords, positions: list[int],
                      convert: Callable[[Sequence[bytes]], ConvertResult]) -> tuple[list[SinkRecords], list[Failure]]:
    """The tombstones at ``positions`` as batches of null values with their converted keys (``convert``
    turns keys into rows), marked as deletes: transforms see them as Connect's tombstones, and staging
    makes deletes by key of them (:func:`as_deletes`)."""
    keyed = [i for i in positions if raw.keys[i] is not None]
    failures = [Failure(i, "a tombstone without a key cannot delete anything") for i in positions
                if raw.keys[i] is None]
    if not keyed:
        return [], failures
    result = convert([k for k in (raw.keys[i] for i in keyed) if k is not None])
    failures += [Failure(keyed[f.index], f"tombstone key: {f.reason}") for f in result.failures]
    failures += [Failure(keyed[i], "tombstone key is null: it names no row to delete") for i in result.nulls]
    offsets = np.asarray(raw.offsets, dtype=np.int64)
    stamps = np.asarray(raw.timestamps, dtype=np.int64)
    out = []
    for part in result.parts:
        rows = np.asarray(keyed, dtype=np.int64)[part.indexes]
        out.append(SinkRecords(raw.topic, raw.partition, no_columns(len(rows)), offsets[rows], stamps[rows], rows,
                               np.full(len(rows), DELETE, dtype=np.int8), tombstone=True, key=part.table,
                               key_primitive=part.primitive))
    return out, failures


def as_deletes(tombstones: SinkRecords) -> SinkRecords | str:
    """Tombstones as deletes by key: their keys' columns as the values a keyed table deletes by; why not,
    when a tombstone carries no key (a transform made it of a record without one)."""
    if tombstones.key is None or not tombstones.key.num_columns:
        return "a tombstone without a key cannot delete anything"
    return replace(tombstones, value=tombstones.key, primitive=tombstones.key_primitive,
                   ops=np.full(len(tombstones), DELETE, dtype=np.int8))


def key_columns(keys: pa.Table, id_columns: list[str]) -> pa.Table:
    """Name a plain key's one column after the table's single id column; keys with fields keep theirs."""
    if keys.column_names != ["value"] or len(id_columns) != 1:
        return keys
    return keys.rename_columns(id_columns)
