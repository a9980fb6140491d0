"""Consume a connector's topics with a Faust agent (faust-streaming on aiokafka).

The Faust app is this connector's consumer group member.  Faust's own offset
commits are switched off (the topic is declared with ``acks=False``, so Faust
never records an acked offset): the sink commits group offsets itself, after
the tables.  On assignment the app seeks every new partition to the position
the tables give; on revocation it waits for the sink's commit round.
"""

from __future__ import annotations

import asyncio
import collections
import tempfile
from collections.abc import Iterable
from typing import Any

import faust
import structlog
from faust.types import TP

from tabletopic.commit.member import Member
from tabletopic.consume.batch_fetch import Fetch
from tabletopic.consume.continuity import STALE
from tabletopic.consume.faust_aiokafka import FetchSizes, commit_offsets, set_resubscribe_delay
from tabletopic.consume.faust_app import ConsumerSettings, faust_app
from tabletopic.consume.flow_control import FlowControl
from tabletopic.consume.group_offsets import GroupOffsetCommits, report_lag
from tabletopic.consume.rebalance import RebalanceHooks
from tabletopic.consume.take import RecordTaking, fetch_bytes
from tabletopic.consume.topic_watch import TopicWatch
from tabletopic.core import scratch_files
from tabletopic.kafka.clients import KafkaClients
from tabletopic.stage.failed_records import RecordFailed
from tabletopic.task.sink_task import SinkTask

log = structlog.get_logger(__name__)
_LAG_EVERY_S = 1.0
# At stop, how long the group offsets of the last rounds may take: half of the runtime's bound on the
# whole stop of the consumer (leaving the group needs the broker too).
_GROUP_COMMIT_WAIT_S = 10.0
# Partitions of one fetch ingested side by side at a time. The event loop runs every task that is
# ready before it looks again, so a fetch of a thousand partitions, all at once, held each await of
# the commit rounds for the whole fetch: an answer took seconds to be judged and committed.
_PARTITIONS_AT_ONCE = 64


class FaustConsumer:
    """The connector's consumer: the Faust app and its agent, gated by :class:`FlowControl`, rebalanced by
    :class:`RebalanceHooks`. Runs on the event loop; owns the lag and topic-watch tasks and cancels them
    at stop."""

    def __init__(self, settings: ConsumerSettings, clients: KafkaClients, task: SinkTask, member: Member) -> None:
        self.clients = clients
        self.task = task
        self.member = member
        self.log = log.bind(connector=settings.name)
        self.fatal: BaseException | None = None
        self.failed = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        # Faust makes its data directory at start even for in-memory tables: left to itself, it makes
        # <group>-data in the working directory of every process. Nothing in it outlives the consumer.
        self._datadir = tempfile.TemporaryDirectory(prefix=scratch_files.prefix("faust"))
        self.app = faust_app(settings, clients, self._datadir.name)
        self._records = RecordTaking(self.app, task.ledger, self.log)
        self._topic_kwargs: dict[str, Any] = {"key_type": bytes, "value_type": bytes, "key_serializer": "raw",
                                              "value_serializer": "raw", "acks": False}
        # Topics are subscribed by the app's conductor, by name; topics.regex is resolved to names by
        # a watch that also finds topics created later (see topic_watch.py). Fetched records reach the
        # agent in per-partition batches through an in-memory channel (see batch_fetch.py).
        self.subscribed: set[str] = set()
        self._watch: TopicWatch | None = None
        if settings.topics_regex is not None:
            self._watch = TopicWatch(clients, settings.topics_regex, max(1.0, settings.topic_refresh_ms / 1000))
            # A topic found by the watch should be read within its interval, not after Faust's 45 s.
            set_resubscribe_delay(self.app, 1.0)
        else:
            self._subscribe(list(settings.topics))
        self.batches = self.app.channel(maxsize=4)
        self.waiting_bytes = 0  # values and keys fetched and not yet taken: they count toward buffer.max-bytes
        self._waiting: collections.deque[int] = collections.deque()  # each waiting fetch's bytes, in channel order
        self.flow = FlowControl(self.app, member, lambda: task.writer.buffered_bytes, task.config.buffer_max_bytes,
                                lambda: self.waiting_bytes, self.log)
        self.app.fetch_sizes = FetchSizes(settings.fetch_min_bytes, settings.fetch_max_wait_ms,
                                          settings.isolation_level)
        self.app.deliver_batch = self._deliver
        self.app.on_drained = lambda wall, cpu: task.metrics.add_stage("fetch", wall, cpu)
        self.app.on_fetch_failed = self._fetch_failed
        self.app.agent(self.batches, name=f"tabletopic-{settings.name}")(self._consume)
        self.rebalances = RebalanceHooks(self.app, task, member, self._fail, self.log)
        self.group_offsets = GroupOffsetCommits(self._commit_group, self.log)
        task.bind_consumer(self.group_offsets.submit, self.rebalances.reseek_all,
                           lambda tp, offset: self.app.request_seek(TP(*tp), offset), lambda: self.waiting_bytes)

    # -- lifecycle --------------------------------------------------------------------------------
    async def start(self) -> None:
        if self._watch is not None:
            self._subscribe(await self._watch.matching())
        await self.app.start()
        self._tasks.append(asyncio.get_running_loop().create_task(
            report_lag(self.app, self.task.ledger, self.task.metrics, self.log, _LAG_EVERY_S), name="lag"))
        if self._watch is not None:
            self._tasks.append(asyncio.get_running_loop().create_task(self._watch_topics(), name="topic-watch"))

    def _subscribe(self, names: Iterable[str]) -> None:
        new = sorted(set(names) - self.subscribed)
        if new:
            self.subscribed.update(new)
            self.app.topics.add(self.app.topic(*new, **self._topic_kwargs))

    async def _watch_topics(self) -> None:
        assert self._watch is not None
        while True:
            await asyncio.sleep(self._watch.every_s)
            try:
                found = await self._watch.matching() - self.subscribed
            except Exception as exc:  # the broker answers again later; the topics read so far go on
                self.log.warning("listing topics for topics.regex failed", error=str(exc))
                continue
            if found:
                self.log.info("new topics match topics.regex", topics=sorted(found))
                self._subscribe(found)

    async def drain(self, wait_s: float) -> None:
        """Take no more records; the fetch being taken ends first (:meth:`FlowControl.drain`)."""
        await self.flow.drain(wait_s)

    async def hold(self) -> None:
        """Pause; the member stays in its group (:meth:`FlowControl.hold`)."""
        await self.flow.hold()

    def release(self) -> None:
        self.flow.release()

    async def stop(self) -> None:
        self.flow.stop()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.group_offsets.close(_GROUP_COMMIT_WAIT_S)  # before the consumer it commits through stops
        await self.app.stop()
        self._datadir.cleanup()

    # -- the agent --------------------------------------------------------------------------------
    async def _deliver(self, fetch: Fetch) -> None:
        size = fetch_bytes(fetch)  # once per fetch: the channel is first in, first out, so _consume pops it
        self._waiting.append(size)
        self.waiting_bytes += size
        await self.batches.put(fetch)  # type: ignore[arg-type]  # an in-memory channel carries any object

    async def _consume(self, stream: faust.StreamT) -> None:
        async for fetch in stream:
            generations, batches = fetch
            self.waiting_bytes -= self._waiting.popleft() if self._waiting else 0
            await self.flow.wait_running()
            if self.flow.draining or self.fatal is not None:
                continue
            async with self.flow.taking:
                await self._ingest(generations, batches)

    async def _ingest(self, generations: dict[TP, int], batches: dict[TP, list[Any]]) -> None:
        try:
            # The partitions side by side, _PARTITIONS_AT_ONCE at a time: one that waits (for its new table,
            # the dead-letter topic) lets the others go on. All of a group end before the next begins; then
            # the group's first error counts, and the partitions after it are not taken.
            items = list(batches.items())
            for start in range(0, len(items), _PARTITIONS_AT_ONCE):
                outcomes = await asyncio.gather(*(self._ingest_partition(tp, messages, generations.get(tp, STALE))
                                                  for tp, messages in items[start:start + _PARTITIONS_AT_ONCE]),
                                                return_exceptions=True)
                for outcome in outcomes:
                    if isinstance(outcome, BaseException):
                        raise outcome
            if self.task.over_memory and not self.flow.draining:
                await self.flow.relieve()
        except RecordFailed as exc:
            self._fail(exc)
        except Exception as exc:  # any other fault stops the connector rather than skipping records
            self.log.exception("sink failed while ingesting records")
            self._fail(exc)

    async def _ingest_partition(self, tp: TP, messages: list[Any], generation: int) -> None:
        # Judged in the same step as the ingest reads its position: an await before it would let a
        # rebalance or a rejected answer move the position between the two.
        with self.task.metrics.timed("take"):
            raw = self._records.take(tp, messages, generation)
        if raw is not None:
            await self.task.ingest(raw)

    def _fetch_failed(self, exc: BaseException) -> None:
        self.log.error("the consumer's fetch loop failed; the connector stops rather than read nothing",
                       error=str(exc) or type(exc).__name__)
        self._fail(exc)

    def _fail(self, exc: BaseException) -> None:
        self.fatal = exc
        self.failed.set()

    # -- group offsets, for lag tools -------------------------------------------------------------
    async def _commit_group(self, positions: dict[tuple[str, int], int]) -> None:
        assignment = self.app.consumer.assignment()
        offsets = {TP(t, p): o for (t, p), o in positions.items() if TP(t, p) in assignment}
        if offsets:
            await commit_offsets(self.app, offsets)
