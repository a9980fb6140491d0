"""The member: epochs checked against the group's generation, and dead tasks never silent."""

from __future__ import annotations

import asyncio

import pytest

from tabletopic.commit.channel import Channel
from tabletopic.commit.events import Answer, Message, Start, Verdict
from tabletopic.commit.member import Member
from tabletopic.kafka.clients import KafkaClients
from tests.unit.fakes import TP0, TP1, FakeSink, FakeTables, metrics, run, settle


def _member() -> tuple[Member, list[Answer]]:
    channel = Channel(KafkaClients(["127.0.0.1:1"], {}), "control", "c")
    sent: list[Answer] = []

    async def send(message: Answer) -> None:
        sent.append(message)

    channel.send = send  # type: ignore[method-assign]
    member = Member("c", channel, FakeSink([TP0]), FakeTables(), metrics(), interval_s=3600, timeout_s=30,
                    stall_intervals=3)
    member.on_assignment({TP0}, {TP0, TP1}, generation=4)
    return member, sent


def test_a_start_claiming_a_generation_the_group_never_had_is_ignored() -> None:
    async def go() -> None:
        member, sent = _member()
        dispatch = asyncio.create_task(member._dispatch())
        member.channel.messages.put_nowait(Start("c", "forged", 2**31 - 1))
        await settle()
        assert member.coordinator.leader and member.worker.max_epoch == -1 and sent == []
        member.channel.messages.put_nowait(Start("c", "real", 4))  # the real coordinator is still answered
        await settle()
        assert [a.commit_id for a in sent] == ["real"]
        # A round of the next generation, seen before this member's own rebalance ends, waits for it.
        member.channel.messages.put_nowait(Start("c", "next", 5))
        await settle()
        assert [a.commit_id for a in sent] == ["real"]
        member.on_assignment({TP0}, {TP0, TP1}, generation=5)
        await settle()
        assert [a.commit_id for a in sent] == ["real", "next"]
        dispatch.cancel()
    run(go())


def test_a_dead_task_fails_the_member() -> None:
    async def go() -> None:
        member, _ = _member()
        member.error_future = asyncio.get_running_loop().create_future()

        async def boom() -> None:
            raise RuntimeError("reader died")

        task = asyncio.create_task(boom())
        task.add_done_callback(member._on_task_done)
        with pytest.raises(RuntimeError, match="reader died"):
            await member.error_future
        assert member.failed
    run(go())


def test_an_answer_without_a_verdict_for_too_long_makes_the_member_unready() -> None:
    member, _ = _member()
    assert member.health() == (True, "ok")
    member.worker.in_flight = object()  # type: ignore[assignment]
    member.worker._waiting_since -= 3 * 3600 + 31
    ok, why = member.health()
    assert not ok and "no verdict" in why


def test_losing_the_first_partition_ends_the_role_at_once() -> None:
    member, _ = _member()
    member.on_assignment({TP0, TP1}, {TP0, TP1}, generation=4)
    member.on_revoked({TP1}, {TP0, TP1})
    assert member.coordinator.leader
    member.on_revoked({TP0}, {TP0, TP1})
    assert not member.coordinator.leader


def test_held_messages_of_a_generation_that_is_over_are_dropped() -> None:
    async def go() -> None:
        member, sent = _member()
        dispatch = asyncio.create_task(member._dispatch())
        member.channel.messages.put_nowait(Start("c", "of-gen-5", 5))
        await settle()
        member.on_assignment({TP0}, {TP0, TP1}, generation=6)  # generation 5 came and went meanwhile
        await settle()
        assert sent == []
        dispatch.cancel()
    run(go())


def _looped_member(assigned: set[tuple[str, int]]) -> tuple[Member, FakeSink, FakeTables, list[Message]]:
    """A member whose sends come back to it, as the control topic brings every member's messages."""
    channel = Channel(KafkaClients(["127.0.0.1:1"], {}), "control", "c")
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)
        channel.messages.put_nowait(message)

    channel.send = send  # type: ignore[method-assign]
    sink, tables = FakeSink(assigned), FakeTables()
    member = Member("c", channel, sink, tables, metrics(), interval_s=3600, timeout_s=30, stall_intervals=3)
    member.on_assignment(assigned, {TP0, TP1}, generation=4)  # TP0, the first partition, is elsewhere
    return member, sink, tables, sent


def test_a_member_that_comes_to_lead_during_its_shutdown_flush_commits_its_answer_itself() -> None:
    # Seen in a scale-out run: the coordinator left, the stopping member got the first partition,
    # and as a closing coordinator runs no interval rounds, nobody committed until its stop timed out.
    async def go() -> None:
        member, sink, tables, sent = _looped_member({TP1})
        dispatch = asyncio.create_task(member._dispatch())
        sink.take(TP1, 0, 10)
        flush = asyncio.create_task(member.flush("shutdown", timeout_s=20))
        await settle()
        [first] = [m for m in sent if isinstance(m, Answer)]
        assert first.epoch == 4 and not flush.done()  # nobody coordinates generation 4 any more
        sink.assigned = {TP0, TP1}
        member.on_assignment({TP0, TP1}, {TP0, TP1}, generation=5)
        assert await flush
        assert tables.offsets == {"db.t": {TP1: 10}} and sink.committed == [{TP1: 10}]
        [start] = [m for m in sent if isinstance(m, Start)]
        assert (start.epoch, start.reason) == (5, "shutdown")
        dispatch.cancel()
    run(go())


def test_an_answer_owed_to_a_newer_coordinator_goes_to_it_at_once_during_a_flush() -> None:
    async def go() -> None:
        member, sink, _, sent = _looped_member({TP1})
        dispatch = asyncio.create_task(member._dispatch())
        sink.take(TP1, 0, 10)
        flush = asyncio.create_task(member.flush("shutdown", timeout_s=20))
        await settle()
        member.on_assignment({TP1}, {TP0, TP1}, generation=5)  # another member leads generation 5
        await settle()
        first, again = [m for m in sent if isinstance(m, Answer)]
        assert again.answer_id == first.answer_id and (again.epoch, again.ranges) == (5, {TP1: (0, 10)})
        assert not flush.done()
        member.channel.messages.put_nowait(Verdict("c", "r", 5, (again.answer_id,), {}, {"db.t": {TP1: 10}}))
        assert await flush
        assert sink.committed == [{TP1: 10}]
        dispatch.cancel()
    run(go())
