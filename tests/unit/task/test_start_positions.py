"""Which partitions need more than their own table's record to know where they resume, and the gate that holds
a partition's records while its start is decided."""

import asyncio
from typing import Any

import structlog

from tabletopic.buffer.partition_ledger import PartitionLedger
from tabletopic.offsets.source_offsets import Recorded
from tabletopic.route.table_feeds import TableFeeds
from tabletopic.task.start_positions import DecisionGate, StartPositions, StartSettings, unanchored
from tabletopic.task.system_outages import SystemOutages
from tests.unit.fakes import metrics

P, Q = ("tt.a", 0), ("tt.b", 0)


def test_a_partition_with_a_group_offset_or_a_table_record_is_anchored() -> None:
    by_table = {"tt.a": Recorded({P: 5}, 1, "snapshot")}
    assert not unanchored({P}, by_table, {})
    assert not unanchored({P, Q}, by_table, {Q: 0})


def test_a_partition_with_neither_needs_every_tables_round_starts() -> None:
    assert unanchored({P, Q}, {"tt.a": Recorded({P: 5}, 1, "snapshot")}, {})
    assert unanchored({Q}, {}, {})


# -- the gate: records of a partition wait while its start is being decided --------------------------------
A, B = ("t", 0), ("t", 1)


async def _waiter(gate: DecisionGate, tp: tuple[str, int], passed: list[tuple[str, int]]) -> None:
    await gate.undecided(tp)
    passed.append(tp)


async def _settle() -> None:
    for _ in range(5):  # let every ready task run: no clock involved
        await asyncio.sleep(0)


def test_a_partition_outside_every_decision_passes_at_once() -> None:
    async def go() -> None:
        gate, passed = DecisionGate(), []
        with gate.deciding({A}):
            await asyncio.wait_for(_waiter(gate, B, passed), 5)
        assert passed == [B]
    asyncio.run(go())


def test_records_wait_until_their_partitions_decision_ends() -> None:
    async def go() -> None:
        gate, passed = DecisionGate(), []
        with gate.deciding({A}):
            waiter = asyncio.create_task(_waiter(gate, A, passed))
            await _settle()
            assert passed == [] and gate.under_way(A)
        await asyncio.wait_for(waiter, 5)
        assert passed == [A] and not gate.under_way(A)
    asyncio.run(go())


def test_overlapping_decisions_hold_a_partition_until_both_end() -> None:
    """A rebalance during a re-read: the partition is in two decisions, and the first ending frees nothing."""
    async def go() -> None:
        gate, passed = DecisionGate(), []
        first, second = gate.deciding({A, B}), gate.deciding({A})
        first.__enter__()
        second.__enter__()
        waiter_a = asyncio.create_task(_waiter(gate, A, passed))
        waiter_b = asyncio.create_task(_waiter(gate, B, passed))
        first.__exit__(None, None, None)
        await _settle()
        assert gate.under_way(A) and not gate.under_way(B)
        assert A not in passed
        second.__exit__(None, None, None)
        await asyncio.wait_for(asyncio.gather(waiter_a, waiter_b), 5)
        assert sorted(passed) == [A, B]
    asyncio.run(go())


def test_a_decision_that_fails_or_is_cancelled_opens_the_gate() -> None:
    async def decide(gate: DecisionGate, started: asyncio.Event) -> None:
        with gate.deciding({A}):
            started.set()
            await asyncio.Event().wait()  # a table read that never answers

    async def go() -> None:
        gate, passed, started = DecisionGate(), [], asyncio.Event()
        decision = asyncio.create_task(decide(gate, started))
        await started.wait()
        waiter = asyncio.create_task(_waiter(gate, A, passed))
        await _settle()
        assert passed == []
        decision.cancel()
        await asyncio.gather(decision, return_exceptions=True)
        await asyncio.wait_for(waiter, 5)
        assert passed == [A]
        try:
            with gate.deciding({A}):
                raise RuntimeError("the catalog refused")
        except RuntimeError:
            pass
        assert not gate.under_way(A)
    asyncio.run(go())


# -- deciding: where each partition starts, from what the tables record -------------------------------------
class _Tables:
    """Tables by name, each recording what ``recorded`` says; none is a Java sink's."""

    def __init__(self, names: list[str]) -> None:
        self.names = names

    def get(self, name: str) -> Any:
        raise AssertionError("only tables that record nothing are asked for their Java sink's commit")

    def known(self) -> list[str]:
        return list(self.names)

    def exists(self, name: str) -> bool:
        return name in self.names

    def try_load(self, name: str) -> Any:
        return object() if name in self.names else None

    def tables_recording(self, group_id: str, namespace: str | None = None) -> set[str]:
        return set(self.names)


class _Buffers:
    def __init__(self) -> None:
        self.dropped: list[tuple[str, tuple[str, int], int]] = []

    def drop_below(self, raised: list[tuple[str, tuple[str, int], int]], why: str) -> None:
        self.dropped.extend(raised)


def _starts(recorded: dict[str, dict[tuple[str, int], int]], group: dict[tuple[str, int], int],
            ledger: PartitionLedger) -> tuple[StartPositions, _Buffers]:
    async def group_offsets(tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        return {tp: o for tp, o in group.items() if tp in tps}
    buffers = _Buffers()
    starts = StartPositions(StartSettings("g", tuple(recorded), False), _Tables(list(recorded)), ledger, buffers,
                            lambda t: Recorded(dict(recorded[t]), 1, "snapshot"), group_offsets,
                            SystemOutages(10, metrics(), structlog.get_logger()), structlog.get_logger(),
                            TableFeeds(None))
    return starts, buffers


def test_a_new_partition_is_sought_where_its_table_says() -> None:
    ledger = PartitionLedger(lambda t: {})
    starts, _ = _starts({"db.t": {A: 10, B: 4}}, {}, ledger)
    seeks = asyncio.run(starts.decide({A, B}))
    assert seeks == {A: 10, B: 4} and ledger.position(A) == 10


def test_a_partition_read_past_its_start_is_not_sought_back_and_its_rows_below_the_floor_go() -> None:
    """Delivery never goes backwards past an accepted record: buffered rows the table already has are dropped."""
    ledger = PartitionLedger(lambda t: {})
    ledger.learn("db.t", {A: 3})
    ledger.floors("db.t")
    ledger.accept(A, 3, 20)
    starts, buffers = _starts({"db.t": {A: 12}}, {}, ledger)
    seeks = asyncio.run(starts.decide({A}))
    assert seeks == {} and ledger.position(A) == 20
    assert buffers.dropped == [("db.t", A, 12)]


def test_a_partition_no_table_records_starts_at_its_group_offset() -> None:
    ledger = PartitionLedger(lambda t: {})
    starts, _ = _starts({"db.t": {A: 10}}, {B: 7}, ledger)
    assert asyncio.run(starts.decide({B})) == {B: 7}
