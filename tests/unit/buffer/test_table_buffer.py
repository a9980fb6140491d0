"""A table's buffer: what a drain hands the writer, its valid-through time among it."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from tabletopic.buffer.table_buffer import TableBuffer
from tabletopic.convert.records import SinkRecords


def part(partition: int, offsets: list[int], stamps: list[int]) -> SinkRecords:
    n = len(offsets)
    return SinkRecords("t", partition, pa.table({"id": list(range(n))}), np.asarray(offsets, dtype=np.int64),
                       np.asarray(stamps, dtype=np.int64), np.arange(n, dtype=np.int64))


def test_valid_through_is_the_oldest_of_each_partitions_newest_timestamp() -> None:
    """Every record of every partition up to it is in the rows: Java's valid-through-ts, per table."""
    buffer = TableBuffer("db.t")
    buffer.add(part(0, [0, 1], [100, 900]), None)
    buffer.add(part(1, [0], [400]), None)
    buffer.add(part(0, [2], [950]), None)
    drained = buffer.drain({})
    assert drained is not None
    assert (drained.max_timestamp_ms, drained.valid_through_ms) == (950, 400)
    assert drained.offsets == {("t", 0): 3, ("t", 1): 1}


def test_rows_dropped_from_the_buffer_take_their_partitions_time_with_them() -> None:
    buffer = TableBuffer("db.t")
    buffer.add(part(0, [0], [900]), None)
    buffer.add(part(1, [0], [100]), None)
    buffer.discard({("t", 1)})
    drained = buffer.drain({})
    assert drained is not None and drained.valid_through_ms == 900
