"""Hand fetched records to the Faust agent a batch at a time, as aiokafka's own record objects.

Faust's consumer delivers each message through ``wait_first(callback(message), ...)``,
which schedules two tasks per record, and builds a ``ConsumerRecord`` and a Faust
``Message`` for each.  Measured here, those objects alone cost about 3.5 µs a record,
more than converting it.  This app keeps everything else of Faust (group membership,
rebalances, flow control, seeks, ``_read_offset`` bookkeeping) and changes how records
come out of it:

* in Faust's consumer thread, aiokafka's fetched batches are drained as the record
  objects its decoder already made (offset, timestamp, key, value, headers), with no
  ``ConsumerRecord`` built for each (see :mod:`tabletopic.consume.faust_aiokafka`, which
  holds every use of the two libraries' internals);
* each fetch is grouped per partition and put on an in-memory Faust channel as one
  object, which the connector's agent consumes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from faust.types import TP, ConsumerT

from tabletopic.consume.continuity import STALE
from tabletopic.consume.faust_aiokafka import FetchLoop, RawFetchApp

log = structlog.get_logger(__name__)
# A fetch: per partition, the seek generation it was fetched under, and its records (aiokafka's record
# objects: .offset, .timestamp in ms, .key, .value, .headers).
Fetch = tuple[dict[TP, int], dict[TP, list[Any]]]
BatchSink = Callable[[Fetch], Awaitable[None]]


class BatchingApp(RawFetchApp):
    """A Faust app that hands each fetch to the agent as one batch.

    Seeks bump a per-partition *generation*, so that the agent can tell a batch fetched
    before a seek from one fetched after it. Outside rebalances, seeks are queued and made
    between two fetches, in the consumer's own thread: the first batch fetched after such a
    seek then starts at the first record the log holds at or past the offset sought, which
    is what lets the agent trust a gap it sees there.
    """

    deliver_batch: BatchSink

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Wall and CPU seconds of each drain of aiokafka's fetched records, from Faust's consumer thread.
        self.on_drained: Callable[[float, float], None] = lambda wall, cpu: None
        # A fetch loop that raised: nothing is fetched any more, so the connector must fail.
        self.on_fetch_failed: Callable[[BaseException], None] = lambda exc: None
        self.seek_generation: dict[TP, int] = {}
        self.between_fetches: dict[TP, int] = {}  # the offset of each partition's last seek made between fetches
        self._queued: dict[TP, int] = {}

    async def seek(self, tp: TP, offset: int) -> None:
        """Seek now (from a rebalance callback), and make every batch fetched before it stale.

        The seek runs in Faust's consumer thread, as every other use of aiokafka's fetcher does: made
        from this thread, it dropped the partition's fetched records while that thread was draining
        them, and aiokafka's drain crashed on the missing key (KeyError in ``fetched_records``), which
        stopped the consumer and left the member in its old generation.
        """
        self._queued.pop(tp, None)
        self.between_fetches.pop(tp, None)
        self.seek_generation[tp] = self.seek_generation.get(tp, 0) + 1
        await self.consumer.seek_wait({tp: offset})

    def request_seek(self, tp: TP, offset: int) -> None:
        """Seek before the next fetch."""
        self._queued[tp] = offset

    def seek_queued(self, tp: TP) -> bool:
        return tp in self._queued

    async def apply_seeks(self, consumer: ConsumerT) -> None:
        if not self._queued:
            return
        queued = dict(self._queued)
        assigned = consumer.assignment()
        for tp in [tp for tp in queued if tp not in assigned]:  # a revoked one is sought by its next owner
            del queued[tp], self._queued[tp]
        if not queued:
            return
        # The agent leaves these partitions alone until the seek is made, and then knows every
        # batch tagged before it for what it is.
        for tp in queued:
            self.seek_generation[tp] = self.seek_generation.get(tp, 0) + 1
        generations = {tp: self.seek_generation[tp] for tp in queued}
        try:
            await consumer.seek_wait(queued)
        except Exception as exc:  # a rebalance took a partition meanwhile: try again before the next fetch
            log.warning("seek failed; trying again", error=str(exc) or type(exc).__name__)
            return
        for tp, offset in queued.items():
            if self.seek_generation[tp] == generations[tp]:  # no rebalance's seek came meanwhile
                self.between_fetches[tp] = offset
            if self._queued.get(tp) == offset:
                del self._queued[tp]

    async def drain_fetches(self, loop: FetchLoop) -> None:  # pragma: no cover - exercised end to end
        """Until the consumer stops: each fetch, with the records Faust already delivered left out, tagged
        with its partitions' seek generations and handed to the agent."""
        read_offset = loop.read_offset
        while not loop.stopped():
            await self.apply_seeks(self.consumer)
            before = dict(self.seek_generation)
            fetched = await loop.next_records(1.0)
            if loop.should_stop:
                return
            if not fetched or not loop.flow_active:
                # Nothing, or a rebalance began meanwhile: its partitions are sought again, and a
                # record skipped here shows as a gap that makes the agent read it again.
                await asyncio.sleep(0)
                continue
            batches: dict[TP, list[Any]] = {}
            for tp, records in fetched.items():
                seen = read_offset[tp]
                if seen is not None and records and records[0].offset < seen:
                    records = [r for r in records if r.offset >= seen]
                if records:
                    batches[tp] = records
                    read_offset[tp] = records[-1].offset
            if batches:
                # Each partition's batch is tagged with the seek generation it was fetched under.
                # A rebalance's seek runs while a fetch may be under way in Faust's consumer
                # thread, and may or may not have reached it: such a batch is tagged STALE.
                after = self.seek_generation
                tags = {tp: after.get(tp, 0) if after.get(tp, 0) == before.get(tp, 0) else STALE
                        for tp in batches}
                await self.deliver_batch((tags, batches))
