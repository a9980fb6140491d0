"""One connector's buffers, a table each, and the sums over them, kept as rows come and go."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import structlog

from tabletopic.buffer.partition_ledger import Raised
from tabletopic.buffer.table_buffer import Drained, TableBuffer
from tabletopic.convert.records import SinkRecords
from tabletopic.core.topic_partition import TopicPartition

log = structlog.get_logger(__name__)


class TableBuffers:
    """Every table's :class:`TableBuffer`, with the rows and bytes they hold in all. Runs on the event loop.

    The sums are read for every batch taken: summing a thousand tables' buffers per batch made a trickle
    on a thousand topics more than the event loop could take. So they move with each add and drain, and
    are counted again only when rows leave several buffers at once.
    """

    def __init__(self) -> None:
        self._by_table: dict[str, TableBuffer] = {}
        self.bytes = 0
        self.records = 0

    def __iter__(self) -> Iterator[TableBuffer]:
        return iter(self._by_table.values())

    def names(self) -> list[str]:
        return list(self._by_table)

    def get(self, table: str) -> TableBuffer | None:
        return self._by_table.get(table)

    def add(self, table: str, parts: Iterable[SinkRecords], floors: dict[TopicPartition, int]) -> None:
        """Buffer ``parts`` for ``table``, leaving out rows below their partition's floor."""
        buffer = self._by_table.get(table)
        if buffer is None:
            buffer = self._by_table[table] = TableBuffer(table)
        bytes_before, records_before = buffer.nbytes, buffer.records
        for part in parts:
            buffer.add(part, floors.get((part.topic, part.partition)))
        self.bytes += buffer.nbytes - bytes_before
        self.records += buffer.records - records_before

    def drain(self, table: str, floors: dict[TopicPartition, int]) -> Drained | None:
        """Everything ``table``'s buffer holds, cut against ``floors``; None if it holds nothing."""
        buffer = self._by_table.get(table)
        drained = buffer.drain(floors) if buffer is not None else None
        if drained is not None:
            self.bytes -= drained.nbytes
            self.records -= drained.records
        return drained

    def drain_all(self, cut_at: dict[str, dict[TopicPartition, int]]) -> list[Drained]:
        """Every buffer that holds rows, each cut against its table's floors in ``cut_at``."""
        drained = [d for d in (b.drain(cut_at[n]) for n, b in self._by_table.items()) if d is not None]
        self._recount()
        return drained

    def drop_below(self, raised: Raised, why: str) -> None:
        """Floors rose: buffered rows below them are in their table already."""
        total = 0
        for table, tp, offset in raised:
            buffer = self._by_table.get(table)
            dropped = buffer.drop_below(tp, offset) if buffer is not None else 0
            if dropped:
                log.info(f"dropped buffered rows {why}", table=table, topic=tp[0], partition=tp[1], records=dropped)
            total += dropped
        if total:
            self._recount()

    def discard(self, tps: set[TopicPartition]) -> None:
        """Drop the rows of partitions this worker no longer owns."""
        for buffer in self._by_table.values():
            dropped = buffer.discard(tps)
            if dropped:
                log.info("dropped buffered rows of revoked partitions", table=buffer.table, records=dropped)
        self._recount()

    def clear(self) -> None:
        for buffer in self._by_table.values():
            buffer.clear()
        self._by_table.clear()
        self._recount()

    def _recount(self) -> None:
        self.bytes = sum(b.nbytes for b in self._by_table.values())
        self.records = sum(b.records for b in self._by_table.values())
