"""Commit barriers across daemons: every member writes files, one coordinator commits them.

Each daemon running a connector is a *worker*: on ``start`` it writes what it
buffered into files and answers with ``data``: the files per table, the offset
range it read per partition, and the table offsets its rows were cut against
(its *floors*).  The member that owns the connector's first partition is the
*coordinator*, for the consumer group generation in which it got it (its
*epoch*).  Every commit interval it sends ``start``, waits until the answers
cover every partition (or ``iceberg.control.commit.timeout-ms`` passes: a late
answer waits for the next barrier), commits one snapshot per table holding
every accepted answer, and sends ``done`` naming what it accepted and rejected.

An answer is accepted only if its floors are what the tables record now and no
other answer in the barrier claims its partitions.  So when a revoked owner's
answer and the new owner's re-read overlap, exactly one is committed; the other
worker is rejected, drops what it holds and reads again from the tables.  A
worker keeps one answer in flight; one that sees a newer epoch while its answer
is unresolved sends it again, to the new coordinator: the floors in it make sure
it is committed once at most, whichever coordinator gets to it first.  The
epoch also goes into each snapshot, and a coordinator whose epoch is older than
the table's can never commit again.  One daemon alone runs the same protocol.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import structlog

from tabletopic.commit.channel import ControlChannel, Event
from tabletopic.commit.events import DataComplete, DataWritten, TopicPartition

if TYPE_CHECKING:
    from tabletopic.sink_task import SinkTask

log = structlog.get_logger(__name__)


def _tp_key(tp: TopicPartition) -> str:
    return f"{tp[1]}:{tp[0]}"  # partition first: topic names may hold colons, partitions never do


def _tp_of(key: str) -> TopicPartition:
    partition, _, topic = key.partition(":")
    return topic, int(partition)


@dataclass
class _Answer:
    member: str
    answer_id: str
    commit_id: str
    assigned: set[TopicPartition]
    ranges: dict[TopicPartition, tuple[int, int]]
    floors: dict[str, dict[TopicPartition, int]]
    files: dict[str, bytes]
    records: dict[str, int]
    file_count: dict[str, int]
    max_ts: dict[str, int | None]
    epoch: int

    @classmethod
    def parse(cls, e: Event) -> _Answer:
        return cls(
            e["member"], e["answer"], e["commit_id"], {_tp_of(k) for k in e["assigned"]},
            {_tp_of(k): (int(v[0]), int(v[1])) for k, v in e["ranges"].items()},
            {t: {_tp_of(k): int(v) for k, v in f.items()} for t, f in e["floors"].items()},
            {t: base64.b64decode(b) for t, b in e["files"].items()},
            {t: int(n) for t, n in e["records"].items()}, {t: int(n) for t, n in e["file_count"].items()},
            dict(e["max_ts"]), int(e.get("epoch", -1)))

    @property
    def carries(self) -> bool:
        return bool(self.ranges or self.files)


@dataclass
class _Round:
    commit_id: str
    started: float
    covered: set[TopicPartition] = field(default_factory=set)
    complete: asyncio.Event = field(default_factory=asyncio.Event)


class Control:
    def __init__(self, task: SinkTask, channel: ControlChannel) -> None:
        self.task = task
        self.channel = channel
        self.member = f"{task.config.name}-{uuid.uuid4().hex[:12]}"
        self.log = log.bind(connector=task.config.name, member=self.member)
        self._interval_s = task.config.commit_interval_ms / 1000
        self._timeout_s = task.config.commit_timeout_ms / 1000
        # worker side
        self.max_epoch = -1
        self._pending: str | None = None  # id of our answer in flight
        self._pending_body: Event = {}
        self._pending_epoch = -1  # the coordinator epoch it was last sent to (-1: whoever coordinates)
        self._pending_ends: dict[TopicPartition, int] = {}
        self._resolved = asyncio.Event()
        self._answer_lock = asyncio.Lock()
        self._rejected = False  # how the last answer ended
        # coordinator side
        self.leader = False
        self.epoch = -1
        self.partitions: set[TopicPartition] = set()
        self._answers: dict[str, _Answer] = {}
        self._round: _Round | None = None
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._round_lock = asyncio.Lock()
        self._closing = False

    async def start(self) -> None:
        await self.channel.start()
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._listen(), name=f"control-listen-{self.member}"),
                       loop.create_task(self._barriers(), name=f"control-barriers-{self.member}")]

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.channel.stop()

    # -- election -----------------------------------------------------------------------------------
    def on_assignment(self, assigned: Iterable[TopicPartition], everything: set[TopicPartition],
                      generation: int) -> None:
        """Coordinate while this member owns the first partition of the connector's topics."""
        first = min(everything) if everything else None
        leader = first is not None and first in set(assigned)
        if leader and (not self.leader or generation != self.epoch):
            self.epoch = generation
            self._answers.clear()
            self.task.coordinator.reset()  # read the tables afresh: an earlier coordinator may have committed
            self.log.info("coordinating commits", epoch=generation, partitions=len(everything))
        elif not leader and self.leader:
            self.log.info("no longer coordinating", epoch=self.epoch)
        self.leader = leader
        self.task.metrics.coordinator.set(1 if leader else 0)
        self.partitions = set(everything)
        self.task.coordinator.epoch = generation if leader else -1

    # -- the listener -------------------------------------------------------------------------------
    async def _listen(self) -> None:
        while True:
            event = await self.channel.events.get()
            try:
                kind = event.get("type")
                if self.leader and int(event.get("epoch", -1)) > self.epoch:
                    # A newer generation has a coordinator: this member lost the role while it was away
                    # (paused, cut off). Step down before doing anything it would do as coordinator.
                    self.log.warning("a newer coordinator exists; no longer coordinating", epoch=self.epoch,
                                     newer=event.get("epoch"))
                    self.leader = False
                    self.task.metrics.coordinator.set(0)
                    self.task.coordinator.epoch = -1
                if kind == "start":
                    await self._on_start(event)
                elif kind == "data" and self.leader:
                    self._on_data(_Answer.parse(event))
                elif kind == "done":
                    await self._on_done(event)
            except Exception:
                self.log.exception("control event failed", event_type=event.get("type"))

    async def _on_start(self, event: Event) -> None:
        epoch = int(event["epoch"])
        if epoch < self.max_epoch:
            return  # a coordinator that lost its role; its barriers are not ours to answer
        self.max_epoch = max(self.max_epoch, epoch)
        async with self._answer_lock:
            if self._pending is not None and self._pending_epoch < epoch:
                # Our answer went to a coordinator that may be gone: hand the same answer to this one.
                # The floors in it decide, so it is committed once at most, whoever gets to it.
                self._pending_epoch = epoch
                await self.channel.send({**self._pending_body, "commit_id": event["commit_id"], "epoch": epoch,
                                         "assigned": [_tp_key(tp) for tp in sorted(self.task.assigned)]})
                return
            await self._answer(event["commit_id"], epoch, solicited=True,
                               reason=str(event.get("reason", "interval")))

    async def answer(self, commit_id: str | None, epoch: int, solicited: bool, reason: str) -> None:
        """Write what is buffered and send it, or, with an answer in flight, only say what we own."""
        # One at a time: a barrier, memory pressure and shutdown may all ask at once, and a second
        # answer written while the first was being written would claim the same ranges with none
        # of the rows.
        async with self._answer_lock:
            await self._answer(commit_id, epoch, solicited, reason)

    async def _answer(self, commit_id: str | None, epoch: int, solicited: bool, reason: str) -> None:
        assigned = sorted(self.task.assigned)
        body: Event = {"type": "data", "commit_id": commit_id or f"{reason}-{uuid.uuid4().hex[:8]}",
                       "answer": uuid.uuid4().hex, "member": self.member, "epoch": epoch, "solicited": solicited,
                       "assigned": [_tp_key(tp) for tp in assigned], "ranges": {}, "floors": {}, "files": {},
                       "records": {}, "file_count": {}, "max_ts": {}}
        if self._pending is None:
            complete = await self.task.write_answer(reason)
            if complete is not None:
                self._fill(body, complete)
        if body["ranges"] or body["files"]:
            self.log.info("answering", answer=body["answer"][:12], epoch=epoch, reason=reason,
                          ranges=" ".join(f"{k}@{a}-{b}" for k, (a, b) in sorted(body["ranges"].items())),
                          records=body["records"])
            self._pending, self._pending_body, self._pending_epoch = body["answer"], body, epoch
            self._pending_ends = {_tp_of(k): v[1] for k, v in body["ranges"].items()}
            self._resolved.clear()
        if solicited or body["ranges"] or body["files"]:
            await self.channel.send(body)

    def _fill(self, body: Event, complete: DataComplete) -> None:
        # Ranges and files come from one snapshot of the worker, even if partitions were revoked while
        # the files were written: the coordinator's floors check settles who gets to commit them.
        for tp, end in complete.positions.items():
            start = complete.starts.get(tp, end)
            if end > start:
                body["ranges"][_tp_key(tp)] = [start, end]
        serialize = self.task.tables.jvm.tabletopic.SinkWriter.serialize
        tps = [_tp_of(k) for k in body["ranges"]]
        for table, floors in complete.floors.items():
            body["floors"][table] = {_tp_key(tp): floors[tp] for tp in tps if tp in floors}
        for written in complete.written:
            # The floors the rows were cut against, not today's view: that is what makes a stale answer
            # (a zombie's, a revoked owner's) fail the coordinator's check.
            floors = written.floors if written.floors is not None else dict.fromkeys(tps, -1)
            body["floors"][written.table] = {_tp_key(tp): floors[tp] for tp in tps if tp in floors}
            body["files"][written.table] = base64.b64encode(bytes(serialize(written.files))).decode()
            body["records"][written.table] = written.records
            body["file_count"][written.table] = written.file_count
            body["max_ts"][written.table] = written.max_timestamp_ms

    async def _on_done(self, event: Event) -> None:
        if int(event.get("epoch", -1)) < self.max_epoch:
            return  # a former coordinator's verdict; a pending answer is sent again to the current one
        if not self.leader:
            # The coordinator's view is what our floors are judged against; a stale one's is not.
            for table, offsets in event.get("offsets", {}).items():
                self.task.coordinator.adopt(table, {_tp_of(k): int(v) for k, v in offsets.items()})
        if self._pending is None:
            return
        if self._pending in event.get("accepted", []):
            ends, self._pending, self._rejected = self._pending_ends, None, False
            await self.task.answer_committed(ends)
            self._resolved.set()
        elif self._pending in event.get("rejected", {}):
            await self._abandon(event["rejected"][self._pending])

    async def _abandon(self, why: str) -> None:
        self._pending, self._rejected = None, True
        self.task.metrics.answers_rejected.inc()
        await self.task.answer_rejected(why)
        self._resolved.set()

    # -- the coordinator ----------------------------------------------------------------------------
    def _on_data(self, answer: _Answer) -> None:
        if answer.carries:  # answers to an earlier coordinator's barrier too: floors decide if they still hold
            # By answer: a resent answer replaces itself, and two answers of one worker are both judged.
            self._answers[answer.answer_id] = answer
            if not answer.commit_id or self._round is None or answer.commit_id != self._round.commit_id:
                self._wake.set()  # an unsolicited flush (shutdown, memory pressure): commit soon
        current = self._round
        if current is not None and answer.commit_id == current.commit_id:
            current.covered |= answer.assigned
            if current.covered >= self.partitions:
                current.complete.set()

    async def _barriers(self) -> None:
        while True:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._interval_s)
            self._wake.clear()
            if self.leader and not self._closing:
                try:
                    await self.run_round("interval")
                except Exception:
                    self.log.exception("commit barrier failed")

    async def run_round(self, reason: str) -> None:
        async with self._round_lock:
            if not self.leader:
                return
            self.task.metrics.barriers.labels(reason=reason).inc()
            current = self._round = _Round(str(uuid.uuid4()), time.monotonic())
            await self.channel.send({"type": "start", "commit_id": current.commit_id, "epoch": self.epoch,
                                     "reason": reason})
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(current.complete.wait(), self._timeout_s)
            if not current.complete.is_set():
                missing = sorted(self.partitions - current.covered)
                self.log.warning("barrier timed out; committing what arrived, the rest waits for the next",
                                 missing=[_tp_key(tp) for tp in missing][:20])
            self._round = None
            answers, self._answers = list(self._answers.values()), {}
            await self._commit(current, answers)

    async def _commit(self, current: _Round, answers: list[_Answer]) -> None:
        view = self.task.coordinator
        for answer in answers:
            for table in answer.floors:
                view.recorded_offsets(table)  # a table first seen here is read before it is judged
        accepted: list[_Answer] = []
        rejected: dict[str, str] = {}
        claimed: set[TopicPartition] = set()
        for answer in answers:
            why = self._judge(answer, claimed)
            if why is None:
                accepted.append(answer)
                claimed |= set(answer.ranges)
            else:
                rejected[answer.answer_id] = why
                self.log.info("answer rejected; its worker reads again from the tables", worker=answer.member,
                              reason=why)
        if accepted:
            self.log.info("answers accepted", commit_id=current.commit_id, answers={
                a.member: " ".join(f"{_tp_key(tp)}@{start}-{end}" for tp, (start, end) in sorted(a.ranges.items()))
                + "; " + " ".join(f"{t}:{n}" for t, n in sorted(a.records.items())) for a in accepted})
        merged = self._merge(current.commit_id, accepted)
        result = await view.commit(merged, current.started)
        if result.fenced or result.failed:
            # Nothing of this barrier may count as committed for the workers unless every table took it.
            why = "; ".join(f"{t}: {w}" for t, w in result.failed.items()) or "fenced"
            rejected.update({a.answer_id: f"the commit failed: {why}" for a in accepted})
            accepted = []
            view.reset()
            self.task.last_barrier_error = why
        else:
            self.task.last_barrier_error = None
        offsets = {t: {_tp_key(tp): o for tp, o in view.table_offsets.get(t, {}).items()} for t in view.table_offsets}
        await self.channel.send({"type": "done", "commit_id": current.commit_id, "epoch": self.epoch,
                                 "accepted": [a.answer_id for a in accepted], "rejected": rejected,
                                 "offsets": offsets})

    def _judge(self, answer: _Answer, claimed: set[TopicPartition]) -> str | None:
        overlap = claimed & set(answer.ranges)
        if overlap:
            return f"another answer in this barrier already covers {sorted(map(_tp_key, overlap))}"
        view = self.task.coordinator
        for table in {*answer.floors, *self.task.tables.known(), *(self.task.config.tables or [])}:
            with contextlib.suppress(Exception):  # a table that does not exist yet records nothing
                view.recorded_offsets(table)
        for tp, (start, end) in answer.ranges.items():
            known = [o[tp] for o in view.table_offsets.values() if tp in o]
            if known and start > max(known):
                return f"{_tp_key(tp)} starts at {start}, past what the tables record ({max(known)}): a gap"
            if known and end <= max(known):
                return f"{_tp_key(tp)} ends at {end}, which the tables already hold ({max(known)})"
        for table, floors in answer.floors.items():
            recorded = view.recorded_offsets(table)
            for tp, (start, _) in answer.ranges.items():
                if recorded.get(tp) != floors.get(tp):
                    return (f"table {table} records {recorded.get(tp)} for {_tp_key(tp)}, the worker cut its "
                            f"rows at {floors.get(tp)}")
                if tp in recorded and start > recorded[tp]:
                    return f"{_tp_key(tp)} starts at {start}, past what {table} records ({recorded[tp]})"
        return None

    def _merge(self, commit_id: str, accepted: list[_Answer]) -> DataComplete:
        jvm = self.task.tables.jvm
        positions: dict[TopicPartition, int] = {}
        by_table: dict[str, DataWritten] = {}
        for answer in accepted:
            for tp, (_, end) in answer.ranges.items():
                positions[tp] = end
            for table, blob in answer.files.items():
                files = jvm.tabletopic.SinkWriter.deserialize(blob)
                old = by_table.get(table)
                stamps = [t for t in (answer.max_ts.get(table), old.max_timestamp_ms if old else None)
                          if t is not None]
                by_table[table] = DataWritten(
                    commit_id, table, files if old is None else jvm.tabletopic.SinkWriter.concat(old.files, files),
                    answer.records.get(table, 0) + (old.records if old else 0),
                    answer.file_count.get(table, 0) + (old.file_count if old else 0),
                    max(stamps) if stamps else None)
        return DataComplete(commit_id, positions, list(by_table.values()))

    async def relieve(self) -> None:
        """Memory pressure: write the buffers out now, or wait for the answer in flight to settle."""
        if self._pending is None:
            await self.answer(None, self.max_epoch, solicited=False, reason="pressure")
        else:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._resolved.wait(), self._interval_s + self._timeout_s)

    # -- shutdown -----------------------------------------------------------------------------------
    async def flush(self, reason: str, timeout_s: float) -> bool:
        """Hand everything buffered to the coordinator and wait until it has decided.

        A rejected answer held records someone else committed first, or that the next owner of
        their partitions reads again: nothing is lost either way. False only if no coordinator
        answered in time; those records, too, are read again.
        """
        self._closing = True  # no new interval barriers; the one under way finishes first
        deadline = time.monotonic() + timeout_s
        async with self._round_lock:
            pass
        for _ in range(4):
            if self._pending is not None:
                if self.leader:
                    await self.run_round(reason)
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._resolved.wait(), max(0.0, deadline - time.monotonic()))
                if self._pending is not None:
                    return False
                if self._rejected:
                    self.log.warning("the last answer was rejected; its records are read again by their next owner")
                    return True
            await self.answer(None, self.max_epoch, solicited=False, reason=reason)
            if self._pending is None:
                return True  # nothing left to hand over
        return False
