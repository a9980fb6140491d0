"""Taking a partition's fetched records: only those that continue it where the sink stands.

Records before the partition's position were taken already (or the tables have them); records past a
gap after a seek wait for the seek; see :mod:`tabletopic.consume.continuity` for the decision.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any

from faust.types import TP

from tabletopic.buffer.partition_ledger import PartitionLedger
from tabletopic.consume.batch_fetch import BatchingApp, Fetch
from tabletopic.consume.continuity import Decision, decide
from tabletopic.convert.records import RawRecords


class RecordTaking:
    """Runs on the event loop, in the same step as the ingest that reads the partition's position."""

    def __init__(self, app: BatchingApp, ledger: PartitionLedger, log: Any) -> None:
        self._app = app
        self._ledger = ledger
        self._log = log
        self._taken_generation: dict[TP, int] = {}  # per partition, the seek generation of the last batch taken

    def take(self, tp: TP, messages: list[Any], generation: int) -> RawRecords | None:
        """A partition's fetched records, if they continue it where the sink stands (see continuity.py).

        ``messages`` are aiokafka's record objects (see batch_fetch.py): timestamps in milliseconds.
        """
        position = self._ledger.position((tp.topic, tp.partition))
        if position is not None and messages[0].offset < position:
            # The tables already have these, or they were taken before a seek to here.
            messages = [m for m in messages if m.offset >= position]
            if not messages:
                return None
        first = messages[0].offset
        decision = decide(position, first, generation, self._app.seek_generation.get(tp, 0), self._app.seek_queued(tp),
                          self._app.between_fetches.get(tp), self._taken_generation.get(tp))
        if decision is Decision.RESEEK:
            self._log.warning("records arrived past a gap; reading the partition again from where the sink "
                              "stands", topic=tp.topic, partition=tp.partition, expected=position, got=first)
            assert position is not None
            self._app.request_seek(tp, position)
        if decision is not Decision.TAKE:
            return None
        if position is not None and first > position:
            self._log.info("offsets skip records the log does not hold (compaction, transaction markers or "
                           "retention)", topic=tp.topic, partition=tp.partition, expected=position, got=first)
        self._taken_generation[tp] = generation
        return RawRecords(
            tp.topic, tp.partition,
            list(map(_OFFSET, messages)),
            list(map(_TIMESTAMP, messages)),
            list(map(_KEY, messages)),
            list(map(_VALUE, messages)),
            list(map(_HEADERS, messages)),
        )


# Record fields read without a Python step per record (map over C getters, not a comprehension).
_OFFSET, _TIMESTAMP, _KEY, _VALUE, _HEADERS = (attrgetter(name) for name in
                                               ("offset", "timestamp", "key", "value", "headers"))


def fetch_bytes(fetch: Fetch) -> int:
    """Bytes of the values and keys of a fetch (what buffering them will roughly take)."""
    return sum(sum(map(len, filter(None, map(_VALUE, records)))) + sum(map(len, filter(None, map(_KEY, records))))
               for records in fetch[1].values())
