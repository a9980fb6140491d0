"""Records between the stages: one topic-partition's converted rows and their Kafka metadata."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa


@dataclass
class RawRecords:
    """What the consumer fetched from one topic-partition, in offset order."""

    topic: str
    partition: int
    offsets: list[int]
    timestamps: list[int]  # milliseconds since the epoch
    keys: list[bytes | None]
    values: list[bytes | None]
    headers: list[list[tuple[str, bytes]]]

    def __len__(self) -> int:
        return len(self.offsets)

    @property
    def next_offset(self) -> int:
        return self.offsets[-1] + 1


Headers = list[tuple[str, Any]]  # one record's headers: name and value, in order


@dataclass
class SinkRecords:
    """Converted rows of one topic-partition; ``rows`` maps each row back to its RawRecords position.

    ``topic``, ``partition`` and ``offsets`` stay the source's whatever a transform does: resume is
    exact by them. What single message transforms see and change of a record lives beside them: the
    topic it now has (``record_topic``), its key and headers (where a transform needs them), and
    whether its value is null (``tombstone``: then ``value`` has no columns, and the key says which
    row a keyed table deletes).
    """

    topic: str
    partition: int
    value: pa.Table
    offsets: np.ndarray  # int64, one per row, ascending
    timestamps: np.ndarray  # int64 milliseconds, one per row
    rows: np.ndarray  # positions in the RawRecords this came from
    # Change kind per row for keyed (upsert/CDC) tables: UPSERT or DELETE; empty means all UPSERT.
    ops: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int8))
    # Values that came without a schema (see convert.converter.Converted.schemaless).
    schemaless: bool = False
    tombstone: bool = False  # every value is null
    primitive: bool = False  # the value is one column, ``value``, not a struct's fields
    key: pa.Table | None = None  # converted keys, where a stage needs them
    key_primitive: bool = False
    headers: list[Headers] | None = None  # per row, where a stage needs them
    logical_topic: str | None = None  # the topic a transform gave the records (RegexRouter, ...)

    def __len__(self) -> int:
        return self.value.num_rows

    @property
    def record_topic(self) -> str:
        """The topic the records have now: the source's, or one a transform gave them."""
        return self.logical_topic if self.logical_topic is not None else self.topic

    def take(self, mask: np.ndarray) -> SinkRecords:
        """The rows where ``mask`` is true."""
        keep = pa.array(mask)
        return replace(self, value=self.value.filter(keep), offsets=self.offsets[mask],
                       timestamps=self.timestamps[mask], rows=self.rows[mask],
                       ops=self.ops[mask] if len(self.ops) else self.ops,
                       key=self.key.filter(keep) if self.key is not None else None,
                       headers=[h for h, kept in zip(self.headers, mask, strict=True) if kept]
                       if self.headers is not None else None)

    def between(self, lo: int, hi: int) -> SinkRecords:
        """Rows ``lo`` to ``hi``: these records themselves when that is all of them."""
        if (lo, hi) == (0, len(self)):
            return self
        mask = np.zeros(len(self), dtype=bool)
        mask[lo:hi] = True
        return self.take(mask)

    def with_value(self, value: pa.Table, primitive: bool | None = None) -> SinkRecords:
        """These records with ``value``; their change kinds stay (a tombstone's key rows are still deletes)."""
        return replace(self, value=value, primitive=self.primitive if primitive is None else primitive,
                       tombstone=False)

    def as_values(self, value: pa.Table, primitive: bool = False) -> SinkRecords:
        """Tombstones given a value by a transform: records with that value, changes no more."""
        return replace(self.with_value(value, primitive), ops=_NO_OPS)

    def as_tombstones(self) -> SinkRecords:
        """These records with null values: tombstones, deletes by key for a keyed table."""
        return replace(self, value=no_columns(len(self)), primitive=False, tombstone=True,
                       ops=np.full(len(self), DELETE, dtype=np.int8))

    def with_topic(self, topic: str) -> SinkRecords:
        """These records as a transform that renames their topic leaves them; the source's stays in ``topic``."""
        return replace(self, logical_topic=None if topic == self.topic else topic)

    def with_headers(self, headers: list[Headers]) -> SinkRecords:
        return replace(self, headers=headers)

    def with_key(self, key: pa.Table, primitive: bool | None = None) -> SinkRecords:
        return replace(self, key=key, key_primitive=self.key_primitive if primitive is None else primitive)

    def with_ops(self, ops: np.ndarray) -> SinkRecords:
        return replace(self, ops=ops)

    def op_array(self) -> np.ndarray:
        return self.ops if len(self.ops) else np.full(len(self), UPSERT, dtype=np.int8)


def no_columns(rows: int) -> pa.Table:
    """A table of ``rows`` rows and no column: a batch of null values."""
    return pa.table({"_": pa.nulls(rows)}).select([])


UPSERT, DELETE = 0, 1
_NO_OPS = np.zeros(0, dtype=np.int8)
