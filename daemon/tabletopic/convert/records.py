"""Records between the stages: one topic-partition's converted rows and their Kafka metadata."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

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


@dataclass
class SinkRecords:
    """Converted rows of one topic-partition; ``rows`` maps each row back to its RawRecords position."""

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

    def __len__(self) -> int:
        return self.value.num_rows

    def take(self, mask: np.ndarray) -> SinkRecords:
        """The rows where ``mask`` is true."""
        return replace(self, value=self.value.filter(pa.array(mask)), offsets=self.offsets[mask],
                       timestamps=self.timestamps[mask], rows=self.rows[mask],
                       ops=self.ops[mask] if len(self.ops) else self.ops)

    def with_value(self, value: pa.Table) -> SinkRecords:
        return replace(self, value=value)

    def with_ops(self, ops: np.ndarray) -> SinkRecords:
        return replace(self, ops=ops)

    def op_array(self) -> np.ndarray:
        return self.ops if len(self.ops) else np.full(len(self), UPSERT, dtype=np.int8)


UPSERT, DELETE = 0, 1
