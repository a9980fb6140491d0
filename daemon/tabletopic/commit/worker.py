"""The worker's side of the commit protocol: answer each round, keep one answer in flight.

On :class:`~tabletopic.commit.events.Start` the worker has its sink write what it
buffered and answers with the files, the ranges they cover and their floors.  It
keeps that answer until a :class:`~tabletopic.commit.events.Verdict` settles it;
meanwhile it answers later rounds with the partitions it owns and no data, so it
never holds a round up.  If the answer's fate is unknown (a newer coordinator, a
lost send, no verdict for a while) the same answer is sent again: its floors make
sure it is committed once at most.  See ``docs/design/exactly-once.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import structlog

from tabletopic.commit.events import Answer, Message, Start, Verdict
from tabletopic.core.topic_partition import TopicPartition
from tabletopic.write.write_result import WriteResult

log = structlog.get_logger(__name__)


class WorkerSink(Protocol):
    """What the worker needs of the sink that buffers and writes rows."""

    @property
    def assigned(self) -> set[TopicPartition]: ...

    async def complete_write(self, reason: str) -> WriteResult | None: ...

    async def answer_committed(self, ends: dict[TopicPartition, int],
                               offsets: dict[str, dict[TopicPartition, int]]) -> None: ...

    async def answer_rejected(self, why: str) -> None: ...

    def adopt(self, offsets: dict[str, dict[TopicPartition, int]]) -> None: ...


class Sender(Protocol):
    async def send(self, message: Message) -> None: ...


@dataclass
class _InFlight:
    answer: Answer
    sent_at: float | None  # None: the last send failed


class Worker:
    """The worker's role: at each round's start it has its sink write what it buffered and answers with
    the files. Runs on the event loop; the writes run on the sink's pool."""

    def __init__(self, connector: str, member: str, channel: Sender, sink: WorkerSink, resend_after_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.connector = connector
        self.member = member
        self._channel = channel
        self._sink = sink
        self._resend_after_s = resend_after_s
        self._clock = clock
        self._log = log.bind(connector=connector, member=member)
        self.max_epoch = -1  # the newest coordinator epoch seen; older coordinators are not answered
        self.in_flight: _InFlight | None = None
        self._waiting_since = clock()  # when the answer in flight was made
        self.rejected_last = False
        self._settled = asyncio.Event()
        self._lock = asyncio.Lock()

    async def receive(self, message: Message) -> None:
        if isinstance(message, Start):
            await self._on_start(message)
        elif isinstance(message, Verdict):
            await self._on_verdict(message)

    async def _on_start(self, start: Start) -> None:
        if start.epoch < self.max_epoch:
            return  # a coordinator that lost its role; its rounds are not ours to answer
        self.max_epoch = start.epoch
        await self.answer(start.commit_id, start.epoch, start.reason)

    async def answer(self, commit_id: str | None, epoch: int, reason: str) -> None:
        """Answer a round (or flush unasked): new data if nothing is in flight, else the same answer or none."""
        # One at a time: a round, memory pressure and shutdown may all ask at once, and a second
        # answer written while the first was being written would claim the same ranges with none
        # of the rows.
        async with self._lock:
            assigned = frozenset(self._sink.assigned)
            flight = self.in_flight
            if flight is not None:
                if self._fate_unknown(flight, epoch):
                    self._log.info("sending the unsettled answer again", answer=flight.answer.answer_id[:12],
                                   epoch=epoch)
                    await self._send(flight, flight.answer.to(commit_id, epoch, assigned))
                elif commit_id is not None:
                    await self._send(None, self._empty(commit_id, epoch, assigned))
                return
            result = await self._sink.complete_write(reason)
            answer = self._build(commit_id, epoch, assigned, result)
            if answer.carries:
                self._log.info("answering", answer=answer.answer_id[:12], epoch=epoch, reason=reason,
                               ranges=" ".join(f"{t}[{p}]@{a}-{b}" for (t, p), (a, b) in sorted(answer.ranges.items())),
                               records={t: f.records for t, f in answer.tables.items()})
                self.in_flight, self._waiting_since = _InFlight(answer, None), self._clock()
                self._settled.clear()
                await self._send(self.in_flight, answer)
            elif commit_id is not None:
                await self._send(None, answer)

    def _fate_unknown(self, flight: _InFlight, epoch: int) -> bool:
        return flight.sent_at is None or epoch > flight.answer.epoch or \
            self._clock() - flight.sent_at >= self._resend_after_s

    async def _send(self, flight: _InFlight | None, answer: Answer) -> None:
        try:
            await self._channel.send(answer)
        except Exception as exc:
            # Its fate is unknown: it is sent again at the next round, and its floors keep that safe.
            self._log.error("could not send an answer; it is sent again at the next round",
                            error=str(exc) or type(exc).__name__)
            if flight is not None:
                flight.sent_at = None
            return
        if flight is not None:
            flight.answer, flight.sent_at = answer, self._clock()

    def _empty(self, commit_id: str | None, epoch: int, assigned: frozenset[TopicPartition]) -> Answer:
        return Answer(self.connector, uuid.uuid4().hex, commit_id, self.member, epoch, assigned)

    def _build(self, commit_id: str | None, epoch: int, assigned: frozenset[TopicPartition],
               result: WriteResult | None) -> Answer:
        answer = self._empty(commit_id, epoch, assigned)
        if result is None:
            return answer
        for tp, end in result.positions.items():
            start = result.starts.get(tp, end)
            if end > start:
                answer.ranges[tp] = (start, end)
        tps = list(answer.ranges)
        for table, floors in result.cut_at.items():
            answer.floors[table] = {tp: floors[tp] for tp in tps if tp in floors}
        for table, files in result.written.items():
            # The floors the rows were cut against, not today's: that is what makes a stale answer
            # (a zombie's, a revoked owner's) fail the coordinator's check.
            cut = result.written_floors.get(table)
            floors = cut if cut is not None else dict.fromkeys(tps, -1)
            answer.floors[table] = {tp: floors[tp] for tp in tps if tp in floors}
            answer.tables[table] = files
        return answer

    async def _on_verdict(self, verdict: Verdict) -> None:
        if verdict.epoch < self.max_epoch:
            return  # a former coordinator's; an unsettled answer goes again to the current one
        self._sink.adopt(verdict.offsets)
        flight = self.in_flight
        if flight is None:
            return
        answer_id = flight.answer.answer_id
        if answer_id in verdict.accepted:
            self.in_flight, self.rejected_last = None, False
            await self._sink.answer_committed({tp: end for tp, (_, end) in flight.answer.ranges.items()},
                                              verdict.offsets)
            self._settle()
        elif answer_id in verdict.rejected:
            self.in_flight, self.rejected_last = None, True
            await self._sink.answer_rejected(verdict.rejected[answer_id])
            self._settle()

    def _settle(self) -> None:
        self._settled.set()

    def stalled_for(self) -> float:
        """Seconds an answer of ours has waited for its verdict (0 with none in flight)."""
        return 0.0 if self.in_flight is None else self._clock() - self._waiting_since

    async def relieve(self, wait_s: float, epoch: int) -> None:
        """Memory pressure: write the buffers out now, or wait for the answer in flight to settle."""
        if self.in_flight is None:
            if epoch < 0:  # no generation yet, so no coordinator either: wait for one
                await asyncio.sleep(min(wait_s, 1.0))
                return
            await self.answer(None, epoch, "pressure")
        else:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._settled.wait(), wait_s)

    async def wait_settled(self, timeout_s: float) -> bool:
        """Wait until nothing is in flight; False if time ran out first."""
        if self.in_flight is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._settled.wait(), max(0.0, timeout_s))
        return self.in_flight is None
