"""The agent's gate: a pause waits for the fetch being taken; memory relief pauses and resumes partitions."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from faust.types import TP

from tabletopic.consume.flow_control import FlowControl
from tests.unit.fakes import run, settle

A, B, C = TP("t", 0), TP("t", 1), TP("t", 2)


class _Consumer:
    """Faust's consumer as relief sees it: an assignment, and the partitions Faust paused itself."""

    def __init__(self, assigned: set[TP], paused_by_faust: set[TP]) -> None:
        self.assigned = set(assigned)
        self._paused_partitions = set(paused_by_faust)
        self.paused: set[TP] = set()
        self.resumed: set[TP] = set()

    def assignment(self) -> set[TP]:
        return set(self.assigned)

    def pause_partitions(self, tps: set[TP]) -> None:
        self.paused |= tps

    def resume_partitions(self, tps: set[TP]) -> None:
        self.resumed |= tps


class _Relief:
    """Each relief commits a share of the buffers, as an early round would; ``meanwhile`` runs at the first."""

    def __init__(self, buffered: list[int], per_relief: int, meanwhile: Any = lambda: None) -> None:
        self.buffered, self.per_relief, self.calls, self._meanwhile = buffered, per_relief, 0, meanwhile

    async def relieve(self) -> None:
        self.calls += 1
        if self.calls == 1:
            self._meanwhile()
        self.buffered[0] = max(0, self.buffered[0] - self.per_relief)


def _flow(consumer: _Consumer, relief: _Relief) -> FlowControl:
    log: Any = SimpleNamespace(info=lambda *a, **k: None, warning=lambda *a, **k: None)
    return FlowControl(SimpleNamespace(consumer=consumer), relief, lambda: relief.buffered[0], 100, lambda: 0, log)


def test_relief_pauses_only_what_faust_did_not_and_lasts_until_the_buffers_are_under_the_bound() -> None:
    async def go() -> None:
        consumer = _Consumer({A, B, C}, paused_by_faust={C})
        # B goes to another member during the relief.
        relief = _Relief([350], per_relief=100, meanwhile=lambda: consumer.assigned.discard(B))
        await _flow(consumer, relief).relieve()
        assert relief.calls == 3 and relief.buffered == [50]
        assert consumer.paused == {A, B}  # C is Faust's own to resume
        assert consumer.resumed == {A}  # B is no longer ours to resume
    run(go())


def test_a_drain_ends_relief_even_over_the_bound() -> None:
    async def go() -> None:
        consumer, relief = _Consumer({A}, set()), _Relief([1000], per_relief=1)
        flow = _flow(consumer, relief)
        flow.stop()
        await flow.relieve()
        assert relief.calls == 1 and consumer.resumed == {A}
    run(go())


def test_a_pause_waits_for_the_fetch_being_taken_and_then_holds_the_agent() -> None:
    async def go() -> None:
        flow = _flow(_Consumer(set(), set()), _Relief([0], 0))
        await flow.taking.acquire()  # a fetch is being taken
        hold = asyncio.create_task(flow.hold())
        await settle()
        assert not hold.done()
        flow.taking.release()
        await hold
        waiting = asyncio.create_task(flow.wait_running())
        await settle()
        assert not waiting.done()
        flow.release()
        await waiting
    run(go())


def test_a_drain_wakes_a_paused_agent_so_that_it_skips_what_is_left() -> None:
    async def go() -> None:
        flow = _flow(_Consumer(set(), set()), _Relief([0], 0))
        await flow.hold()
        waiting = asyncio.create_task(flow.wait_running())
        await flow.drain(wait_s=5)
        await waiting
        assert flow.draining
    run(go())
