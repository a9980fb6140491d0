"""SinkRecords' changes of value: what stays with the records (their source offsets, their change kinds)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from tabletopic.convert.records import DELETE, UPSERT, SinkRecords, no_columns


def tombstones() -> SinkRecords:
    return SinkRecords("t", 0, no_columns(2), np.array([5, 6]), np.array([0, 0]), np.array([0, 1]),
                       np.full(2, DELETE, dtype=np.int8), tombstone=True, key=pa.table({"id": [1, 2]}))


def test_the_key_rows_of_tombstones_stay_deletes() -> None:
    # The writer gives a delete its key columns as its value: it must stay a delete.
    keyed = tombstones().with_value(pa.table({"id": [1, 2]}))
    assert keyed.op_array().tolist() == [DELETE, DELETE] and not keyed.tombstone


def test_tombstones_a_transform_gives_a_value_are_changes_no_more() -> None:
    wrapped = tombstones().as_values(pa.table({"f": pa.nulls(2)}))
    assert wrapped.op_array().tolist() == [UPSERT, UPSERT] and not wrapped.tombstone


def test_a_new_topic_keeps_the_source_topic_and_offsets() -> None:
    moved = tombstones().with_topic("elsewhere")
    assert (moved.topic, moved.record_topic, moved.offsets.tolist()) == ("t", "elsewhere", [5, 6])
    assert moved.with_topic("t").logical_topic is None
