"""The coordinator's side of the commit protocol: run a round every interval and commit it.

The member that owns the connector's first partition coordinates, for the
consumer group generation in which it got it (its *epoch*).  Every
``iceberg.control.commit.interval-ms``, counted from the start of the previous
round, it sends :class:`~tabletopic.commit.events.Start`, waits until the answers
cover every partition or ``iceberg.control.commit.timeout-ms`` passes, judges
every answer that arrived (late ones from earlier rounds too), commits one
snapshot per table and sends a :class:`~tabletopic.commit.events.Verdict`.
See ``docs/design/exactly-once.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any, Protocol, TypeVar

import structlog
from aiokafka.errors import KafkaError

from tabletopic.commit.commit_state import CommitState, judge
from tabletopic.commit.events import Answer, Message, Start, Verdict
from tabletopic.commit.maintenance_runs import MaintenanceRuns
from tabletopic.commit.repeated_refusals import CommitRefused, RepeatedRefusals
from tabletopic.commit.table_commits import RoundOutcome
from tabletopic.commit.worker import Sender
from tabletopic.core.topic_partition import TopicPartition
from tabletopic.observe.metrics import SinkMetrics
from tabletopic.write.write_result import TableFiles

log = structlog.get_logger(__name__)
_T = TypeVar("_T")


class CoordinatorTables(Protocol):
    """What the coordinator needs of the tables it commits to."""

    def recorded(self, names: Iterable[str] = ()) -> dict[str, dict[TopicPartition, int]]: ...

    def reset(self) -> None: ...

    def clean(self) -> dict[str, dict[TopicPartition, int]]: ...

    def invalid_files(self, answer: Answer) -> str | None: ...

    async def off_loop(self, call: Callable[..., _T], *args: Any) -> _T:
        """``call(*args)``, one of the reads above, off the event loop."""
        ...

    async def commit(self, positions: dict[TopicPartition, int], starts: dict[TopicPartition, int],
                     by_table: dict[str, TableFiles], started: float, epoch: int, task: str = "") -> RoundOutcome: ...


class Coordinator:
    """The commit coordinator's role, played by the member that leads the control group: it gathers the
    workers' answers each round, judges them against what the tables record, and commits every table.

    Runs on the event loop; its table reads and commits run on the pools of its :class:`CoordinatorTables`.
    """

    def __init__(self, connector: str, member: str, channel: Sender, tables: CoordinatorTables,
                 metrics: SinkMetrics, interval_s: float, timeout_s: float,
                 clock: Callable[[], float] = time.monotonic, maintenance: MaintenanceRuns | None = None,
                 wall_clock: Callable[[], float] = time.time, max_refusals: int = 3,
                 max_conflicts: int | None = None) -> None:
        self.connector = connector
        self._member = member
        self._channel = channel
        self._tables = tables
        self._metrics = metrics
        self._interval_s = interval_s
        self._timeout_s = timeout_s
        self._clock = clock
        self._wall_clock = wall_clock
        self._maintenance = maintenance or MaintenanceRuns(None, connector, log)  # its member's: runs between rounds
        self._log = log.bind(connector=connector, member=member)
        self.leader = False
        self.epoch = -1
        self.partitions: frozenset[TopicPartition] = frozenset()
        self.closing = False  # no more interval rounds; the shutdown flush runs its own
        self.last_error: str | None = None
        self._refusals = RepeatedRefusals(max_refusals, max_conflicts)
        self._given_up: CommitRefused | None = None  # set by a round; run() raises it, which fails the connector
        self._last_progress = clock()  # the end of the last round that committed, or when we took the role
        self._answers: dict[str, Answer] = {}  # answers with data, by id, until a round judges them
        self._round: CommitState | None = None
        self._round_done = asyncio.Event()
        self._wake = asyncio.Event()
        self._lock = asyncio.Lock()

    # -- election -----------------------------------------------------------------------------------
    def on_assignment(self, leader: bool, generation: int, partitions: frozenset[TopicPartition]) -> None:
        if generation != self.epoch or not leader:
            # Members of the round under way may have left: it would wait out its timeout for them.
            self._round_done.set()
        if leader and (not self.leader or generation != self.epoch):
            self.epoch = generation
            self._answers.clear()
            self._tables.reset()  # read the tables afresh: an earlier coordinator may have committed
            self._last_progress = self._clock()
            self._log.info("coordinating commits", epoch=generation, partitions=len(partitions))
        elif not leader and self.leader:
            self._log.info("no longer coordinating", epoch=self.epoch)
        self.leader = leader
        self.partitions = partitions
        self._metrics.coordinator.set(1 if leader else 0)

    def resign(self, why: str) -> None:
        """Stop coordinating now (a revocation, or a newer coordinator); the next assignment decides again.

        Its commits would be refused by the tables' epoch anyway: this only stops it trying.
        """
        if self.leader:
            self._log.warning("no longer coordinating", epoch=self.epoch, reason=why)
            self.leader = False
            self._metrics.coordinator.set(0)
            self._round_done.set()
            self._maintenance.interrupt()

    # -- messages -----------------------------------------------------------------------------------
    async def receive(self, message: Message) -> None:
        if self.leader and message.epoch > self.epoch:
            self.resign(f"a coordinator of generation {message.epoch} exists")
        if isinstance(message, Answer) and self.leader:
            self._on_answer(message)

    def _on_answer(self, answer: Answer) -> None:
        current = self._round
        if answer.carries:
            # By id: a resent answer replaces itself, and two answers of one worker are both judged.
            self._answers[answer.answer_id] = answer
            if current is None or answer.commit_id != current.commit_id:
                self._wake.set()  # unasked (shutdown, memory pressure) or late: commit soon
        if current is not None:
            current.add(answer)
            if current.is_complete:
                self._round_done.set()

    # -- rounds -------------------------------------------------------------------------------------
    async def run(self) -> None:
        """Rounds on the interval while this member coordinates; owned and cancelled by its member."""
        next_at = self._clock() + self._interval_s
        while True:
            await self._wait_until(next_at)
            started = self._clock()
            if self.leader and not self.closing:
                try:
                    await self.run_round("interval")
                except KafkaError as exc:  # the broker: the next round tries again, /ready tells meanwhile
                    self.last_error = f"control topic: {exc}"
                    self._log.error("round failed; the next one tries again", error=str(exc))
                if self._given_up is not None:
                    raise self._given_up
                if self.leader and not self.closing:
                    self._maintenance.between_rounds(self.epoch, self.holds(self.epoch))
            # Counted from the round's start, so commits come once per interval, not interval + round.
            next_at = started + self._interval_s

    def holds(self, epoch: int) -> Callable[[], bool]:
        """Whether this coordinator still holds ``epoch``, and is not closing: what a maintenance run goes on under."""
        return lambda: self.leader and self.epoch == epoch and not self.closing

    async def _wait_until(self, deadline: float) -> None:
        """Until ``deadline``, or sooner if an unasked or late answer wants a commit."""
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._wake.wait(), max(0.0, deadline - self._clock()))
        self._wake.clear()

    async def close(self) -> None:
        """No more interval rounds; the round under way commits what has arrived, now."""
        self.closing = True
        self._round_done.set()
        # Briefly: a cancelled Spark job ends at once, and the stop timeout is for the final commit.
        await self._maintenance.stop(timeout_s=10.0)
        async with self._lock:
            pass

    async def run_round(self, reason: str) -> None:
        async with self._lock:
            if not self.leader:
                return
            self._metrics.rounds.labels(reason=reason).inc()
            self._metrics.barriers.labels(reason=reason).inc()
            state = self._round = CommitState(str(uuid.uuid4()), self.epoch, self.partitions, self._clock())
            self._round_done.clear()
            try:
                await self._channel.send(Start(self.connector, state.commit_id, self.epoch, reason))
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._round_done.wait(), self._timeout_s)
            finally:
                self._round = None
            if not self.leader:
                # Resigned meanwhile: the next coordinator gets these answers again from their workers.
                self._log.info("round abandoned: no longer coordinating", commit_id=state.commit_id)
                return
            if not state.is_complete:
                # A shutdown cuts the round under way short on purpose: that is no trouble to warn of.
                report = self._log.info if self.closing else self._log.warning
                report("round ended before every partition answered; committing what arrived, the rest "
                       "waits for the next", missing=[f"{t}[{p}]" for t, p in state.missing()][:20],
                       closing=self.closing)
            answers, self._answers = list(self._answers.values()), {}
            await self._commit(state, answers)

    async def _commit(self, state: CommitState, answers: list[Answer]) -> None:
        rejected: dict[str, str] = {}
        valid = []
        for answer in answers:
            why = await self._tables.off_loop(self._tables.invalid_files, answer) if answer.tables else None
            if why is None:
                valid.append(answer)
            else:
                rejected[answer.answer_id] = why
        names = {t for a in valid for t in (*a.floors, *a.tables)}
        max_wait_s = self._maintenance.max_file_wait_s
        max_wait_ms = max_wait_s * 1000 if max_wait_s is not None else None
        judgement = judge(valid, await self._tables.off_loop(self._tables.recorded, names), self._tables.clean(),
                          self._wall_clock() * 1000, max_wait_ms)
        rejected.update(judgement.rejected)
        for answer_id, why in rejected.items():
            self._log.info("answer rejected; its worker reads again from the tables", answer=answer_id[:12],
                           reason=why)
        if judgement.accepted:
            self._log.info("answers accepted", commit_id=state.commit_id, answers={
                a.answer_id[:12]: f"{a.member}: " + " ".join(f"{t}[{p}]@{s}-{e}" for (t, p), (s, e)
                                                             in sorted(a.ranges.items()))
                for a in judgement.accepted})
        outcome = await self._tables.commit(judgement.positions(), judgement.starts(), judgement.tables(),
                                            state.started, self.epoch, self._member)
        accepted = [a.answer_id for a in judgement.accepted]
        if outcome.ok:
            self.last_error = None
            self._last_progress = self._clock()
            offsets = outcome.recorded
        else:
            # Nothing of this round counts as committed for the workers unless every table took it.
            why = "; ".join(f"{t}: {w}" for t, w in outcome.failed.items())
            rejected.update({a: f"the commit failed: {why}" for a in accepted})
            accepted, offsets = [], {}
            self.last_error = why
        self._given_up = self._given_up or self._refusals.observe(outcome.failed, outcome.snapshots)
        await self._channel.send(Verdict(self.connector, state.commit_id, self.epoch, tuple(accepted), rejected,
                                         offsets))

    def stalled_for(self) -> float:
        """Seconds since this coordinator's last round that committed (0 when not coordinating)."""
        return self._clock() - self._last_progress if self.leader else 0.0
