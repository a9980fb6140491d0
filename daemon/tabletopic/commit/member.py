"""One daemon's place in a connector's commit protocol: a worker always, the coordinator sometimes.

The member owns the control channel, the two roles and the tasks that drive them
(the message dispatch and the coordinator's rounds).  It starts them, cancels and
awaits them in :meth:`stop`, and :attr:`error_future` fails if any of them dies, so
the daemon stops instead of timing rounds out for ever.

Every message's epoch is checked against the consumer group generation this member
got from the broker.  A message that claims a generation this member has not reached
is held (a few at most) until it does: a real coordinator may start a round a moment
before this member finishes the same rebalance.  A forged ``start`` with a huge epoch
is never reached, ages out of the hold, and cannot unseat the coordinator.
The protocol is in ``docs/design/exactly-once.md``.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import deque
from collections.abc import Iterable

import structlog

from tabletopic.commit.channel import Channel
from tabletopic.commit.coordinator import Coordinator, CoordinatorTables
from tabletopic.commit.events import Message
from tabletopic.commit.maintenance_runs import MaintenanceRuns, TableMaintenance
from tabletopic.commit.worker import Worker, WorkerSink
from tabletopic.core.topic_partition import TopicPartition
from tabletopic.observe.metrics import SinkMetrics

log = structlog.get_logger(__name__)
_HELD = 16


class Member:
    """One connector's member of its control group: the worker role always, the coordinator's while it
    leads. Owns both roles' tasks, cancels and awaits them; runs on the event loop."""

    def __init__(self, connector: str, channel: Channel, sink: WorkerSink, tables: CoordinatorTables,
                 metrics: SinkMetrics, interval_s: float, timeout_s: float, stall_intervals: int,
                 maintenance: TableMaintenance | None = None, max_refusals: int = 3,
                 max_conflicts: int | None = None) -> None:
        self.connector = connector
        self.id = f"{connector}-{uuid.uuid4().hex[:12]}"
        self.channel = channel
        self._metrics = metrics
        self._interval_s = interval_s
        self._timeout_s = timeout_s
        self._stall_s = stall_intervals * interval_s + timeout_s
        self._log = log.bind(connector=connector, member=self.id)
        self.worker = Worker(connector, self.id, channel, sink, resend_after_s=interval_s + timeout_s)
        self.maintenance = MaintenanceRuns(maintenance, connector, self._log)
        self.coordinator = Coordinator(connector, self.id, channel, tables, metrics, interval_s, timeout_s,
                                       maintenance=self.maintenance, max_refusals=max_refusals,
                                       max_conflicts=max_conflicts)
        self.generation = -1
        self._untrusted_logged = False
        self._held: deque[Message] = deque(maxlen=_HELD)  # messages from a generation not reached yet
        # Set by every assignment and revocation: a flush waiting on a verdict looks again, since this
        # member may lead now, or its answer may be owed to a newer coordinator.
        self._regrouped = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self.error_future: asyncio.Future[None] | None = None

    async def start(self) -> None:
        await self.channel.start()
        loop = asyncio.get_running_loop()
        self.error_future = loop.create_future()
        self._tasks = [loop.create_task(self._dispatch(), name=f"control-dispatch-{self.id}"),
                       loop.create_task(self.coordinator.run(), name=f"control-rounds-{self.id}")]
        for task in self._tasks:
            task.add_done_callback(self._on_task_done)
        assert self.channel.error_future is not None
        self.channel.error_future.add_done_callback(self._on_channel_failed)

    async def stop(self) -> None:
        await self.maintenance.stop()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.channel.stop()

    @property
    def failed(self) -> bool:
        return self.error_future is not None and self.error_future.done()

    def _on_task_done(self, task: asyncio.Task[None]) -> None:
        if task.cancelled() or self.error_future is None or self.error_future.done():
            return
        self.error_future.set_exception(task.exception() or RuntimeError(f"{task.get_name()} ended"))

    def _on_channel_failed(self, future: asyncio.Future[None]) -> None:
        failure = None if future.cancelled() else future.exception()
        if failure is not None and self.error_future is not None and not self.error_future.done():
            self.error_future.set_exception(failure)

    # -- election -----------------------------------------------------------------------------------
    def on_assignment(self, assigned: Iterable[TopicPartition], everything: set[TopicPartition],
                      generation: int) -> None:
        """Coordinate while this member owns the first partition of the connector's topics."""
        self.generation = generation
        self._regrouped.set()
        for message in [m for m in self._held if m.epoch <= generation]:
            self._held.remove(message)
            if message.epoch == generation:  # one of an earlier generation is over, and is dropped
                self.channel.messages.put_nowait(message)
        first = min(everything) if everything else None
        self.coordinator.on_assignment(first is not None and first in set(assigned), generation,
                                       frozenset(everything))

    def on_revoked(self, revoked: Iterable[TopicPartition], everything: set[TopicPartition]) -> None:
        """A member that loses the first partition stops coordinating at once, before the rebalance ends."""
        self._regrouped.set()
        first = min(everything) if everything else None
        if first is not None and first in set(revoked):
            self.coordinator.resign("its first partition was revoked")

    # -- messages -----------------------------------------------------------------------------------
    async def _dispatch(self) -> None:
        while True:
            message = await self.channel.messages.get()
            if message.epoch > self.generation:
                self._held.append(message)
                self._metrics.control_messages_skipped.inc()
                if not self._untrusted_logged:  # once: a flood must not flood the log too
                    self._untrusted_logged = True
                    self._log.warning("held a control message claiming a generation this member has not reached; "
                                      "it counts once the member gets there", epoch=message.epoch,
                                      generation=self.generation, type=type(message).__name__)
                continue
            await self.coordinator.receive(message)
            await self.worker.receive(message)

    # -- pressure and shutdown ------------------------------------------------------------------------
    async def relieve(self) -> None:
        await self.worker.relieve(self._interval_s + self._timeout_s, self._answer_epoch())

    def _answer_epoch(self) -> int:
        """The epoch an unasked answer names: a coordinator heard of, or else our own generation's.

        Before the first round of a long interval no Start has come, but the coordinator of this
        generation has this epoch: the answer wakes it instead of waiting for the interval.
        """
        return max(self.worker.max_epoch, self.generation)

    async def flush(self, reason: str, timeout_s: float, closing: bool = True) -> bool:
        """Hand everything buffered to the coordinator and wait until it has decided.

        A rejected answer held records someone else committed first, or that the next owner of
        their partitions reads again: nothing is lost either way. False only if no coordinator
        answered in time; those records, too, are read again. ``closing`` (shutdown) also ends the
        coordinator's interval rounds; a pause keeps them, for the other members.

        The group may rebalance while it waits. If this member then leads, nobody else runs a round
        (a closing coordinator runs no interval rounds), so the flush runs one; if another member
        leads, the answer goes to it at once under the new epoch instead of at its next round.
        """
        deadline = time.monotonic() + timeout_s
        if closing:
            await self.coordinator.close()  # the round under way commits what has arrived
        worker = self.worker
        answers = 0
        while True:
            flight = worker.in_flight
            if flight is not None:
                self._regrouped.clear()
                if self.coordinator.leader:
                    await self.coordinator.run_round(reason)
                elif flight.answer.epoch < self._answer_epoch():
                    await worker.answer(None, self._answer_epoch(), reason)  # sent again, to the newer coordinator
                settled = await self._settled_or_regrouped(deadline - time.monotonic())
                if settled is None or (not settled and time.monotonic() >= deadline):
                    return False
                if not settled:
                    continue
                if worker.rejected_last:
                    self._log.warning("the last answer was rejected; its records are read again by their next owner")
                    return True
            if answers == 4 or time.monotonic() >= deadline:
                return False  # records keep arriving faster than rounds commit them
            if self._answer_epoch() < 0:
                return worker.in_flight is None  # no generation yet: nobody could commit an answer
            await worker.answer(None, self._answer_epoch(), reason)
            answers += 1
            if worker.in_flight is None:
                return True  # nothing left to hand over

    async def _settled_or_regrouped(self, timeout_s: float) -> bool | None:
        """True once nothing is in flight, False if the group regrouped first, None if time ran out."""
        settled = asyncio.ensure_future(self.worker.wait_settled(timeout_s))
        regrouped = asyncio.ensure_future(self._regrouped.wait())
        try:
            await asyncio.wait({settled, regrouped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in (settled, regrouped):
                waiter.cancel()
            await asyncio.gather(settled, regrouped, return_exceptions=True)
        if self.worker.in_flight is None:
            return True
        return False if regrouped.done() and not regrouped.cancelled() else None

    # -- readiness ----------------------------------------------------------------------------------
    def health(self) -> tuple[bool, str]:
        stalled = max(self.coordinator.stalled_for(), self.worker.stalled_for())
        self._metrics.commit_stalled_seconds.set(stalled if stalled > self._stall_s else 0)
        if stalled > self._stall_s:
            role = "no round has committed" if self.coordinator.stalled_for() > self._stall_s else \
                "this worker's answer has had no verdict"
            return False, f"{role} for {stalled:.0f}s (over {self._stall_s:.0f}s)"
        return True, "ok"
