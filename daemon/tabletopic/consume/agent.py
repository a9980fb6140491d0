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
from tabletopic.consume.faust_aiokafka import (
    FetchSizes,
    commit_offsets,
    kafka_consumer,
    paused_partitions,
    set_resubscribe_delay,
)
from tabletopic.consume.faust_app import ConsumerSettings, faust_app
from tabletopic.consume.group_offsets import GroupOffsetCommits, report_lag
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
    """The connector's consumer: the Faust app, its agent and its rebalance hooks. Runs on the event loop;
    owns the lag and topic-watch tasks and cancels them at stop."""

    def __init__(self, settings: ConsumerSettings, clients: KafkaClients, task: SinkTask, member: Member) -> None:
        self.clients = clients
        self.task = task
        self.member = member
        self.log = log.bind(connector=settings.name)
        self.fatal: BaseException | None = None
        self.failed = asyncio.Event()
        self._draining = False
        self._running = asyncio.Event()  # cleared while the connector is paused: fetches wait in the channel
        self._running.set()
        self._taking = asyncio.Lock()  # held while a fetch is being ingested
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
        self._memory_paused: set[TP] = set()  # partitions paused here because the buffers are full
        self.app.fetch_sizes = FetchSizes(settings.fetch_min_bytes, settings.fetch_max_wait_ms,
                                          settings.isolation_level)
        self.app.deliver_batch = self._deliver
        self.app.on_drained = lambda wall, cpu: task.metrics.add_stage("fetch", wall, cpu)
        self.app.on_fetch_failed = self._fetch_failed
        self.app.agent(self.batches, name=f"tabletopic-{settings.name}")(self._consume)
        # Faust's stub asks for handlers of (sender, *args); it calls them (sender, partitions, signal=...).
        self.app.on_partitions_assigned.connect(self._on_assigned)  # type: ignore[arg-type]
        self.app.on_partitions_revoked.connect(self._on_revoked)  # type: ignore[arg-type]
        self.group_offsets = GroupOffsetCommits(self._commit_group, self.log)
        task.bind_consumer(self.group_offsets.submit, self._reseek_all,
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
        """Stop handing records to the sink (the final round follows).

        The fetch being ingested ends first, for at most ``wait_s``, so that its records are in the final
        round: one may be waiting for its new table to be created. Past that its records are read again
        after a restart, as any not committed.
        """
        self._draining = True
        self._running.set()  # a paused agent wakes up, to skip what is left
        try:
            await asyncio.wait_for(self._ingested(), wait_s)
        except asyncio.TimeoutError:
            self.log.warning("the records being ingested did not reach the buffers before the final round; "
                             "they are read again after a restart", waited_s=wait_s)

    async def _ingested(self) -> None:
        async with self._taking:
            pass

    async def hold(self) -> None:
        """Pause: take no more fetches, once the one being ingested is done.

        The member stays in its group (its heartbeats go on), the channel fills and Faust's fetch
        loop waits on it: nothing is read, and nothing fetched is lost.
        """
        self._running.clear()
        async with self._taking:
            pass

    def release(self) -> None:
        """Resume after :meth:`hold`."""
        self._running.set()

    @property
    def held(self) -> bool:
        return not self._running.is_set()

    async def stop(self) -> None:
        self._draining = True
        self._running.set()
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
            await self._running.wait()
            if self._draining or self.fatal is not None:
                continue
            async with self._taking:
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
            if self.task.over_memory and not self._draining:
                await self._relieve()
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

    async def _relieve(self) -> None:
        """Over tabletopic.buffer.max-bytes: pause the partitions until a commit has drained the buffers.

        A paused partition stays assigned (no rebalance); aiokafka keeps at most one fetch of it, which
        is not drained until it resumes, so nothing fetched is dropped or read twice. Fetches already
        handed over wait in the channel and count toward the bound.
        """
        assigned = set(self.app.consumer.assignment())
        self._memory_paused = assigned - paused_partitions(self.app)
        self.app.consumer.pause_partitions(self._memory_paused)
        self.log.info("buffers over tabletopic.buffer.max-bytes: partitions paused until a commit drains them",
                      buffered_bytes=self.task.writer.buffered_bytes, waiting_bytes=self.waiting_bytes)
        try:
            # The first relief writes what is buffered and hands it over (an early commit); more are needed
            # only while an earlier answer, still unsettled, kept it from writing. Fetches waiting in the
            # channel are not waited for: they are taken once the partitions resume.
            await self.member.relieve()
            while self.task.writer.buffered_bytes > self.task.config.buffer_max_bytes and not self._draining:
                await self.member.relieve()
        finally:
            resumed = self._memory_paused & set(self.app.consumer.assignment())
            self.app.consumer.resume_partitions(resumed)
            self._memory_paused = set()

    def _fetch_failed(self, exc: BaseException) -> None:
        self.log.error("the consumer's fetch loop failed; the connector stops rather than read nothing",
                       error=str(exc) or type(exc).__name__)
        self._fail(exc)

    def _fail(self, exc: BaseException) -> None:
        self.fatal = exc
        self.failed.set()

    # -- rebalances -------------------------------------------------------------------------------
    async def _on_assigned(self, sender: Any, assigned: set[TP], **_: Any) -> None:
        tps = {(tp.topic, tp.partition) for tp in assigned}
        try:
            seeks = await self.task.on_assigned(tps)
        except Exception as exc:
            self.log.exception("cannot read positions from the tables; stopping rather than guessing")
            self._fail(exc)
            return
        for (topic, partition), offset in seeks.items():
            await self.app.seek(TP(topic, partition), offset)
        self.member.on_assignment(tps, self._all_partitions(), int(self.app.consumer_generation_id or 0))
        self.log.info("partitions assigned", partitions=len(tps), seeked=len(seeks))

    def _all_partitions(self) -> set[tuple[str, int]]:
        """Every partition of the subscribed topics, across all members (the coordinator waits for them)."""
        consumer = kafka_consumer(self.app)
        out: set[tuple[str, int]] = set()
        for topic in consumer.subscription():
            out |= {(topic, p) for p in consumer.partitions_for_topic(topic) or ()}
        return out

    async def _on_revoked(self, sender: Any, revoked: set[TP], **_: Any) -> None:
        tps = {(tp.topic, tp.partition) for tp in revoked}
        self.log.info("partitions revoked", partitions=len(tps))
        if tps:
            self.member.on_revoked(tps, self._all_partitions())
        await self.task.on_revoked(tps)

    async def _reseek_all(self) -> None:
        """After a fenced commit: positions come from the tables again."""
        seeks = await self.task.seek_positions(set(self.task.assigned))
        for (topic, partition), offset in seeks.items():
            self.app.request_seek(TP(topic, partition), offset)

    # -- group offsets, for lag tools -------------------------------------------------------------
    async def _commit_group(self, positions: dict[tuple[str, int], int]) -> None:
        assignment = self.app.consumer.assignment()
        offsets = {TP(t, p): o for (t, p), o in positions.items() if TP(t, p) in assignment}
        if offsets:
            await commit_offsets(self.app, offsets)
