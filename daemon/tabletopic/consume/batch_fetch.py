"""Hand fetched records to the Faust agent a batch at a time, as aiokafka's own record objects.

Faust's consumer delivers each message through ``wait_first(callback(message), ...)``,
which schedules two tasks per record, and builds a ``ConsumerRecord`` and a Faust
``Message`` for each.  Measured here, those objects alone cost about 3.5 µs a record,
more than converting it.  This consumer keeps everything else of Faust (group
membership, rebalances, flow control, seeks, ``_read_offset`` bookkeeping) and changes
how records come out of it:

* in Faust's consumer thread, aiokafka's fetched batches are drained as the record
  objects its decoder already made (offset, timestamp, key, value, headers), with no
  ``ConsumerRecord`` built for each (:func:`fetch_raw`);
* each fetch is grouped per partition and put on an in-memory Faust channel as one
  object, which the connector's agent consumes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import faust
import structlog
from aiokafka.consumer.fetcher import FetchResult
from aiokafka.errors import ConsumerStoppedError
from faust.transport.drivers.aiokafka import Consumer as AIOKafkaConsumer
from faust.types import TP

from tabletopic.consume.continuity import STALE

log = structlog.get_logger(__name__)
# A fetch: per partition, the seek generation it was fetched under, and its records (aiokafka's record
# objects: .offset, .timestamp in ms, .key, .value, .headers).
Fetch = tuple[dict[TP, int], dict[TP, list[Any]]]
BatchSink = Callable[[Fetch], Awaitable[None]]


def _as_is(_tp: Any, record: Any) -> Any:
    return record


async def fetch_raw(thread: Any, active: set[TP] | None, timeout: float, max_records: int,
                    on_drained: Callable[[float, float], None]) -> dict[TP, list[Any]]:
    """Run in Faust's consumer thread: what aiokafka has fetched, as its decoder's record objects.

    aiokafka's ``fetched_records`` turns each record into a ``ConsumerRecord`` through one
    method of its per-partition iterator; giving each iterator that method as an identity
    function before draining it keeps the decoder's objects instead.  The waiting mirrors
    ``fetched_records``' own.
    """
    if not thread.consumer.flow_active:
        return {}
    consumer = thread._ensure_consumer()
    fetcher = consumer._fetcher
    if consumer._closed or fetcher._closed:
        raise ConsumerStoppedError()
    deadline = time.monotonic() + timeout
    with fetcher._subscriptions.fetch_context():
        while True:
            for result in list(fetcher._records.values()):
                records = result._partition_records if type(result) is FetchResult else None
                if records is not None and "_consumer_record" not in vars(records):
                    records._consumer_record = _as_is
            wall, cpu = time.perf_counter(), time.thread_time()
            drained: dict[TP, list[Any]] = await fetcher.fetched_records(active, timeout=0, max_records=max_records)
            on_drained(time.perf_counter() - wall, time.thread_time() - cpu)
            remaining = deadline - time.monotonic()
            if drained or remaining <= 0 or fetcher._closed:
                return drained
            waiter = fetcher._create_fetch_waiter()
            done, pending = await asyncio.wait([waiter], timeout=remaining)
            for future in pending:
                future.cancel()
            if waiter in done:
                waiter.result()  # authorization errors


class BatchDrainConsumer(AIOKafkaConsumer):
    """Faust's aiokafka consumer, delivering one batch of raw records per fetch."""

    async def _getmany(self, active_partitions: set[TP] | None, timeout: float) -> Any:
        thread = self._thread
        app: BatchingApp = self.app  # type: ignore[assignment]
        return await thread.call_thread(fetch_raw, thread, active_partitions, timeout,
                                        thread._ensure_consumer()._max_poll_records, app.on_drained)

    async def _drain_messages(self, fetcher: Any) -> None:  # pragma: no cover - exercised end to end
        app: BatchingApp = self.app  # type: ignore[assignment]
        deliver = app.deliver_batch
        consumer_stopped = self._stopped.is_set
        fetcher_stopped = fetcher._stopped.is_set
        read_offset = self._read_offset
        try:
            while not (consumer_stopped() or fetcher_stopped()):
                await app.apply_seeks(self)
                before = dict(app.seek_generation)
                fetched, _ = await self._wait_next_records(1.0)
                if self.should_stop:
                    return
                if not fetched or not self.flow_active:
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
                    after = app.seek_generation
                    tags = {tp: after.get(tp, 0) if after.get(tp, 0) == before.get(tp, 0) else STALE
                            for tp in batches}
                    await deliver((tags, batches))
        except self.consumer_stopped_errors:
            if self.transport.app.should_stop:
                return
            raise
        except asyncio.CancelledError:
            if self.transport.app.should_stop:
                return
            raise


class BatchingApp(faust.App):
    """A Faust app whose consumer is :class:`BatchDrainConsumer`.

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
        self.seek_generation: dict[TP, int] = {}
        self.between_fetches: dict[TP, int] = {}  # the offset of each partition's last seek made between fetches
        self._queued: dict[TP, int] = {}

    async def seek(self, tp: TP, offset: int) -> None:
        """Seek now (from a rebalance callback), and make every batch fetched before it stale."""
        self._queued.pop(tp, None)
        self.between_fetches.pop(tp, None)
        self.seek_generation[tp] = self.seek_generation.get(tp, 0) + 1
        await self.consumer.seek(tp, offset)

    def request_seek(self, tp: TP, offset: int) -> None:
        """Seek before the next fetch."""
        self._queued[tp] = offset

    def seek_queued(self, tp: TP) -> bool:
        return tp in self._queued

    async def apply_seeks(self, consumer: AIOKafkaConsumer) -> None:
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

    def _new_transport(self) -> Any:
        transport = super()._new_transport()
        transport.Consumer = BatchDrainConsumer
        return transport
