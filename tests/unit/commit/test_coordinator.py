"""The coordinator's rounds against a fake channel and fake tables: completion, timeouts, late answers."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import structlog

from tabletopic.commit.coordinator import Coordinator
from tabletopic.commit.events import Start, Verdict
from tabletopic.commit.maintenance_runs import MaintenanceRuns
from tabletopic.commit.repeated_refusals import CommitRefused
from tabletopic.write.java_errors import JavaErrorKind
from tabletopic.write.table_committer import CommitFailed
from tabletopic.write.write_result import TableFiles
from tests.unit.fakes import TP0, TP1, FakeChannel, FakeTables, answer, files, metrics, run, settle

LOG = structlog.get_logger(__name__)


def _coordinator(timeout_s: float = 3600.0) -> tuple[Coordinator, FakeChannel, FakeTables]:
    channel, tables = FakeChannel(), FakeTables()
    coordinator = Coordinator("c", "m", channel, tables, metrics(), interval_s=3600.0, timeout_s=timeout_s)
    coordinator.on_assignment(True, 1, frozenset({TP0, TP1}))
    return coordinator, channel, tables


def test_a_round_completes_once_every_partition_answered_idle_ones_included() -> None:
    async def go() -> None:
        coordinator, channel, tables = _coordinator(timeout_s=3600.0)  # only coverage can end this round
        task = asyncio.create_task(coordinator.run_round("interval"))
        await settle()
        [start] = channel.of(Start)
        await coordinator.receive(answer("a1", start.commit_id, [TP1], {TP1: (0, 10)}, {"db.t": {}},
                                         {"db.t": files("/wh/1")}))
        await settle()
        assert not task.done()  # the idle member that owns t[0] has not answered yet
        await coordinator.receive(answer("a2", start.commit_id, [TP0]))
        await asyncio.wait_for(task, 30)  # a guard against a hang: with a 3600 s timeout only coverage ends it
        [verdict] = channel.of(Verdict)
        assert verdict.accepted == ("a1",) and tables.offsets == {"db.t": {TP1: 10}}
    run(go())


def test_a_timed_out_round_commits_what_arrived_and_a_late_answer_goes_in_the_next() -> None:
    async def go() -> None:
        coordinator, channel, tables = _coordinator(timeout_s=0.01)
        task = asyncio.create_task(coordinator.run_round("interval"))
        await settle()
        first = channel.of(Start)[0].commit_id
        await coordinator.receive(answer("a1", first, [TP1], {TP1: (0, 10)}, {"db.t": {}}, {"db.t": files("/wh/1")}))
        await task  # t[0] never answers: the round ends on its timeout
        assert channel.of(Verdict)[0].accepted == ("a1",) and tables.offsets == {"db.t": {TP1: 10}}
        # t[0]'s worker answers the old round after it closed: kept and judged by the next.
        await coordinator.receive(answer("late", first, [TP0], {TP0: (0, 7)}, {"db.t": {}}, {"db.t": files("/wh/2")}))
        await coordinator.run_round("interval")
        assert channel.of(Verdict)[1].accepted == ("late",)
        assert tables.offsets == {"db.t": {TP0: 7, TP1: 10}}
    run(go())


def test_a_failed_commit_rejects_every_answer_of_the_round() -> None:
    async def go() -> None:
        coordinator, channel, tables = _coordinator(timeout_s=0.01)
        tables.fail = CommitFailed("the catalog is down")
        await coordinator.receive(answer("a1", None, [TP0], {TP0: (0, 10)}, {"db.t": {}}, {"db.t": files("/wh/1")}))
        await coordinator.run_round("interval")
        [verdict] = channel.of(Verdict)
        assert verdict.accepted == () and "the catalog is down" in verdict.rejected["a1"]
        assert coordinator.last_error and tables.offsets == {}
    run(go())


def test_files_outside_the_table_are_rejected_before_judging() -> None:
    async def go() -> None:
        coordinator, channel, tables = _coordinator(timeout_s=0.01)
        await coordinator.receive(answer("bad", None, [TP0], {TP0: (0, 10)}, {"db.t": {}},
                                         {"db.t": files("/etc/passwd")}))
        await coordinator.run_round("interval")
        assert "not under the table" in channel.of(Verdict)[0].rejected["bad"] and tables.files == {}
    run(go())


def test_a_newer_epoch_makes_the_coordinator_step_down() -> None:
    async def go() -> None:
        coordinator, channel, _ = _coordinator()
        await coordinator.receive(Start("c", "r9", 2))
        assert not coordinator.leader
        await coordinator.run_round("interval")
        assert channel.sent == []
    run(go())


def test_rounds_come_once_per_interval_counted_from_each_start() -> None:
    async def go() -> None:
        now = [0.0]
        coordinator = Coordinator("c", "m", FakeChannel(), FakeTables(), metrics(), interval_s=10.0, timeout_s=1.0,
                                  clock=lambda: now[0])
        coordinator.on_assignment(True, 1, frozenset({TP0}))
        deadlines: list[float] = []

        async def wait_until(deadline: float) -> None:  # the clock jumps to the deadline at once
            deadlines.append(deadline)
            if len(deadlines) > 3:
                raise asyncio.CancelledError
            now[0] = max(now[0], deadline)

        async def four_second_round(reason: str) -> None:
            now[0] += 4.0

        coordinator._wait_until = wait_until  # type: ignore[method-assign]
        coordinator.run_round = four_second_round  # type: ignore[method-assign]
        task = asyncio.create_task(coordinator.run())
        await asyncio.gather(task, return_exceptions=True)
        # Not 10, 24, 38: a round's own time does not push the next one back.
        assert deadlines == [10.0, 20.0, 30.0, 40.0]
    run(go())


def test_a_rebalance_ends_the_round_under_way_instead_of_its_timeout() -> None:
    async def go() -> None:
        coordinator, channel, tables = _coordinator(timeout_s=3600.0)
        task = asyncio.create_task(coordinator.run_round("interval"))
        await settle()
        [start] = channel.of(Start)
        await coordinator.receive(answer("a1", start.commit_id, [TP1], {TP1: (0, 10)}, {"db.t": {}},
                                         {"db.t": files("/wh/1")}))
        coordinator.on_assignment(True, 2, frozenset({TP0, TP1}))  # t[0]'s member left: it will never answer
        await asyncio.wait_for(task, 30)  # a guard against a hang: only the rebalance can end this round
        # A new epoch starts from the tables: a1's worker sends it again to the new epoch's round.
        assert channel.of(Verdict)[0].accepted == () and tables.offsets == {}
        task = asyncio.create_task(coordinator.run_round("interval"))
        await settle()
        again = answer("a1", channel.of(Start)[1].commit_id, [TP0, TP1], {TP1: (0, 10)}, {"db.t": {}},
                       {"db.t": files("/wh/1")}, epoch=2)
        await coordinator.receive(again)
        await asyncio.wait_for(task, 30)
        assert channel.of(Verdict)[1].accepted == ("a1",) and tables.offsets == {"db.t": {TP1: 10}}
    run(go())


async def _round_with_an_answer() -> tuple[Coordinator, FakeChannel, FakeTables, asyncio.Task[None]]:
    """A round under way (that only coverage could end) with t[1]'s answer in; t[0] never answers."""
    coordinator, channel, tables = _coordinator(timeout_s=3600.0)
    task = asyncio.create_task(coordinator.run_round("interval"))
    await settle()
    await coordinator.receive(answer("a1", channel.of(Start)[0].commit_id, [TP1], {TP1: (0, 4)}, {"db.t": {}},
                                     {"db.t": files("/wh/1")}))
    return coordinator, channel, tables, task


def test_closing_commits_what_arrived_now() -> None:
    async def go() -> None:
        coordinator, _, tables, task = await _round_with_an_answer()
        await asyncio.wait_for(coordinator.close(), 30)
        assert task.done() and tables.offsets == {"db.t": {TP1: 4}}
    run(go())


def test_a_coordinator_that_resigns_mid_round_commits_nothing() -> None:
    async def go() -> None:
        coordinator, channel, tables, task = await _round_with_an_answer()
        coordinator.resign("its first partition was revoked")
        await asyncio.wait_for(task, 30)
        assert channel.of(Verdict) == [] and tables.offsets == {}
    run(go())


class FakeMaintenance:
    """Maintenance that runs until told to stop, recording what it was asked."""

    max_file_wait_s = 60.0

    def __init__(self) -> None:
        self.last_error: str | None = None
        self.runs: list[tuple[list[str], int]] = []
        self.interrupted = 0
        self.release = asyncio.Event()
        self.still_mine: list[bool] = []

    def due(self) -> list[str]:
        return ["db.t"]

    async def run(self, names: list[str], epoch: int, keep_going: Any) -> None:
        self.runs.append((names, epoch))
        await self.release.wait()
        self.still_mine.append(keep_going())

    def interrupt(self) -> None:
        self.interrupted += 1
        self.release.set()

    def resume(self) -> None:
        self.release.clear()


def test_files_that_waited_longer_than_half_the_orphan_guard_are_never_committed() -> None:
    async def go() -> None:
        wall = [1_000.0]
        channel, tables = FakeChannel(), FakeTables()
        coordinator = Coordinator("c", "m", channel, tables, metrics(), interval_s=3600.0, timeout_s=0.01,
                                  maintenance=MaintenanceRuns(FakeMaintenance(), "c", LOG),
                                  wall_clock=lambda: wall[0])
        coordinator.on_assignment(True, 1, frozenset({TP0, TP1}))
        old = TableFiles([{"file-path": "/wh/old", "content": "data"}], 1, None, written_at_ms=900_000)
        new = TableFiles([{"file-path": "/wh/new", "content": "data"}], 1, None, written_at_ms=999_000)
        await coordinator.receive(answer("old", None, [TP0], {TP0: (0, 5)}, {"db.t": {}}, {"db.t": old}))
        await coordinator.receive(answer("new", None, [TP1], {TP1: (0, 5)}, {"db.t": {}}, {"db.t": new}))
        await coordinator.run_round("interval")
        [verdict] = channel.of(Verdict)
        assert verdict.accepted == ("new",) and "100s ago" in verdict.rejected["old"]
        assert tables.offsets == {"db.t": {TP1: 5}}
    run(go())


def test_maintenance_runs_under_the_epoch_and_stops_when_the_role_is_lost() -> None:
    async def go() -> None:
        maintenance = FakeMaintenance()
        runs = MaintenanceRuns(maintenance, "c", LOG)
        coordinator = Coordinator("c", "m", FakeChannel(), FakeTables(), metrics(), interval_s=3600.0,
                                  timeout_s=0.01, maintenance=runs)
        coordinator.on_assignment(True, 7, frozenset({TP0}))
        runs.between_rounds(7, coordinator.holds(7))
        runs.between_rounds(7, coordinator.holds(7))  # one run at a time
        await settle()
        assert maintenance.runs == [(["db.t"], 7)]
        coordinator.resign("a newer coordinator exists")
        await settle()
        assert maintenance.interrupted == 1 and maintenance.still_mine == [False]
    run(go())


def test_closing_interrupts_and_awaits_the_maintenance_run() -> None:
    async def go() -> None:
        maintenance = FakeMaintenance()
        runs = MaintenanceRuns(maintenance, "c", LOG)
        coordinator = Coordinator("c", "m", FakeChannel(), FakeTables(), metrics(), interval_s=3600.0,
                                  timeout_s=0.01, maintenance=runs)
        coordinator.on_assignment(True, 1, frozenset({TP0}))
        runs.between_rounds(1, coordinator.holds(1))
        await settle()
        await asyncio.wait_for(coordinator.close(), 30)  # a guard against a hang: close must end the run
        assert maintenance.interrupted == 1 and maintenance.still_mine == [False]
    run(go())


def test_a_failed_maintenance_run_is_kept_as_the_reason_until_one_succeeds() -> None:
    class Failing(FakeMaintenance):
        async def run(self, names: list[str], epoch: int, keep_going: Any) -> None:
            raise RuntimeError("spark job aborted")

    async def go() -> None:
        runs = MaintenanceRuns(Failing(), "c", LOG)
        runs.between_rounds(1, lambda: True)
        await settle()
        assert runs.last_error == "spark job aborted"
    run(go())


def test_a_table_whose_maintenance_failed_is_the_reason_too() -> None:
    """The maintainer catches a table's failure and goes on to the next table: /ready must still see it."""
    class OneTableFails(FakeMaintenance):
        async def run(self, names: list[str], epoch: int, keep_going: Any) -> None:
            self.last_error = "db.t: storage refused the rewrite"

    async def go() -> None:
        maintenance = OneTableFails()
        runs = MaintenanceRuns(maintenance, "c", LOG)
        runs.between_rounds(1, lambda: True)
        await settle()
        assert runs.last_error == "db.t: storage refused the rewrite"
        maintenance.last_error = None  # the next look at it succeeded
        assert runs.last_error is None
    run(go())


def test_a_commit_refused_the_same_way_three_rounds_in_a_row_ends_the_rounds_with_that_cause() -> None:
    async def go() -> None:
        coordinator, channel, tables = _coordinator(timeout_s=0.01)
        refusal = "IllegalArgumentException: Must use DVs for position deletes in V3: /wh/{n}-deletes.parquet"
        rounds = asyncio.create_task(coordinator.run())
        for n in range(1, 4):
            tables.fail = CommitFailed(refusal.format(n=n), JavaErrorKind.REFUSED)  # another file each round: one cause
            # Unasked, so it wakes the coordinator for a round now, not after the interval.
            await coordinator.receive(answer(f"a{n}", None, [TP0], {TP0: (0, 10)}, {"db.t": {}},
                                             {"db.t": files(f"/wh/{n}")}))
            for _ in range(100):
                if len(channel.of(Verdict)) == n:
                    break
                await asyncio.sleep(0.01)
        with pytest.raises(CommitRefused, match=r"Must use DVs .* \(refused 3 rounds in a row"):
            await asyncio.wait_for(rounds, 30)  # a guard against a hang: the third refusal ends the rounds
        assert len(channel.of(Verdict)) == 3
    run(go())
