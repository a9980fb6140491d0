"""Per-table buffers of converted rows, between routing and the next write.

Rows under their partition's *floor* (the offset below which the table already
holds every record, kept by :mod:`tabletopic.buffer.partition_ledger`) are
dropped on the way in: after a restart the consumer seeks to the lowest floor
over all tables, so a table that was ahead sees records it already has.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from tabletopic.convert.records import SinkRecords
from tabletopic.core.topic_partition import TopicPartition


class SchemaConflict(Exception):
    """Rows whose column types cannot be unified with rows already buffered for the table."""


@dataclass
class Drained:
    """Everything one buffer held, ready to be written."""

    table: str
    rows: pa.Table
    records: int
    nbytes: int
    max_timestamp_ms: int | None
    offsets: dict[TopicPartition, int]  # next offset per topic-partition covered
    ops: np.ndarray  # per row: UPSERT or DELETE (keyed tables)
    order: np.ndarray  # per row: its rank in (topic-partition, offset) order, for "last change wins"
    floors: dict[TopicPartition, int] = field(default_factory=dict)  # what the table held when these were cut
    # The oldest of each partition's newest timestamp: every record up to it, in each partition, is in these
    # rows or before them (the Iceberg sink's valid-through timestamp).
    valid_through_ms: int | None = None


@dataclass
class TableBuffer:
    table: str
    # (topic-partition, rows, newest timestamp, offsets, change kinds), in arrival order
    _parts: list[tuple[TopicPartition, pa.Table, int, np.ndarray, np.ndarray]] = field(default_factory=list)
    _schema: pa.Schema | None = None
    records: int = 0
    nbytes: int = 0
    _max_ts: int | None = None
    _offsets: dict[TopicPartition, int] = field(default_factory=dict)
    _newest: dict[TopicPartition, int] = field(default_factory=dict)  # per partition, its newest timestamp

    def add(self, records: SinkRecords, floor: int | None) -> int:
        """Buffer the rows at or above ``floor``; return how many were taken."""
        tp = (records.topic, records.partition)
        if floor is not None and len(records) and records.offsets[0] < floor:
            records = records.take(records.offsets >= floor)
        if not len(records):
            return 0
        schema = records.value.schema
        if self._schema is None:
            self._schema = schema
        elif schema != self._schema:
            try:
                self._schema = pa.unify_schemas([self._schema, schema], promote_options="permissive")
            except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
                raise SchemaConflict(f"rows for table {self.table} do not fit the rows before them: {exc}") from exc
        self._parts.append((tp, records.value, int(records.timestamps.max()), records.offsets, records.op_array()))
        self.records += len(records)
        self.nbytes += records.value.nbytes
        newest = int(records.timestamps.max())
        self._max_ts = newest if self._max_ts is None else max(self._max_ts, newest)
        self._newest[tp] = max(self._newest.get(tp, newest), newest)
        self._offsets[tp] = max(self._offsets.get(tp, 0), int(records.offsets[-1]) + 1)
        return len(records)

    def drain(self, floors: dict[TopicPartition, int]) -> Drained | None:
        if not self._parts:
            return None
        tables = [part[1] for part in self._parts]
        rows = tables[0] if len(tables) == 1 else pa.concat_tables(tables, promote_options="permissive")
        ops = np.concatenate([part[4] for part in self._parts])
        # Tombstones and values of one fetch are buffered apart, so arrival order is not offset order.
        tp_ids = {tp: i for i, tp in enumerate(sorted({part[0] for part in self._parts}))}
        partition_of = np.concatenate([np.full(len(part[3]), tp_ids[part[0]]) for part in self._parts])
        offsets = np.concatenate([part[3] for part in self._parts])
        order = np.empty(len(offsets), dtype=np.int64)
        order[np.lexsort((offsets, partition_of))] = np.arange(len(offsets))
        drained = Drained(self.table, rows, self.records, self.nbytes, self._max_ts, dict(self._offsets), ops, order,
                          dict(floors), min(self._newest.values()))
        self.clear()
        return drained

    def clear(self) -> None:
        self._parts, self._schema, self.records, self.nbytes, self._max_ts = [], None, 0, 0, None
        self._offsets, self._newest = {}, {}

    def discard(self, tps: set[TopicPartition]) -> int:
        """Drop rows of partitions this worker no longer owns; return how many."""
        return self._keep(lambda tp, offsets: None if tp in tps else np.ones(len(offsets), dtype=bool))

    def drop_below(self, tp: TopicPartition, offset: int) -> int:
        """Drop rows of ``tp`` below ``offset`` (the table has them already); return how many."""
        return self._keep(lambda t, offsets: offsets >= offset if t == tp else np.ones(len(offsets), dtype=bool))

    def _keep(self, which: Callable[[TopicPartition, np.ndarray], np.ndarray | None]) -> int:
        parts, before = self._parts, self.records
        self.clear()
        for tp, rows, newest, offsets, ops in parts:
            mask = which(tp, offsets)
            if mask is None or not mask.any():
                continue
            if not mask.all():
                rows, offsets, ops = rows.filter(pa.array(mask)), offsets[mask], ops[mask]
            self._parts.append((tp, rows, newest, offsets, ops))
            self.records += rows.num_rows
            self.nbytes += rows.nbytes
            self._max_ts = newest if self._max_ts is None else max(self._max_ts, newest)
            self._newest[tp] = max(self._newest.get(tp, newest), newest)
            self._schema = rows.schema
            self._offsets[tp] = max(self._offsets.get(tp, 0), int(offsets[-1]) + 1)
        return before - self.records
