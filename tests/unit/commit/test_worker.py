"""The worker's answers: one in flight, resent when its fate is unknown, settled by verdicts."""

from __future__ import annotations

from tabletopic.commit.events import Answer, Start, Verdict
from tabletopic.commit.worker import Worker
from tests.unit.fakes import TP0, TP1, FakeChannel, FakeSink, run


def _worker(now: list[float]) -> tuple[Worker, FakeChannel, FakeSink]:
    channel, sink = FakeChannel(), FakeSink([TP0])
    return Worker("c", "w", channel, sink, resend_after_s=60.0, clock=lambda: now[0]), channel, sink


def test_one_answer_in_flight_later_rounds_get_only_the_partitions() -> None:
    async def go() -> None:
        worker, channel, sink = _worker([0.0])
        sink.take(TP0, 0, 10)
        await worker.receive(Start("c", "r1", 1))
        sink.take(TP0, 10, 20)
        await worker.receive(Start("c", "r2", 1))
        first, second = channel.of(Answer)
        assert first.ranges == {TP0: (0, 10)} and first.tables
        assert second.commit_id == "r2" and not second.carries and second.assigned == {TP0}
        assert sink.writes == 1  # nothing new is written while an answer is unsettled
    run(go())


def test_an_accepted_answer_moves_the_sink_on_and_a_rejected_one_makes_it_read_again() -> None:
    async def go() -> None:
        worker, channel, sink = _worker([0.0])
        sink.take(TP0, 0, 10)
        await worker.receive(Start("c", "r1", 1))
        [sent] = channel.of(Answer)
        await worker.receive(Verdict("c", "r1", 1, (sent.answer_id,), {}, {"db.t": {TP0: 10}}))
        assert sink.committed == [{TP0: 10}] and worker.in_flight is None
        sink.take(TP0, 10, 20)
        await worker.receive(Start("c", "r2", 1))
        second = channel.of(Answer)[-1]
        await worker.receive(Verdict("c", "r2", 1, (), {second.answer_id: "floors moved"}, {}))
        assert sink.rejected == ["floors moved"] and worker.in_flight is None and worker.rejected_last
    run(go())


def test_a_newer_epoch_gets_the_same_answer_again() -> None:
    async def go() -> None:
        worker, channel, sink = _worker([0.0])
        sink.take(TP0, 0, 10)
        await worker.receive(Start("c", "r1", 1))
        await worker.receive(Start("c", "r2", 2))  # a new coordinator; the old one may be gone
        first, again = channel.of(Answer)
        assert again.answer_id == first.answer_id and (again.commit_id, again.epoch) == ("r2", 2)
        assert again.ranges == first.ranges and again.tables == first.tables
        # A verdict of the older coordinator no longer counts.
        await worker.receive(Verdict("c", "r1", 1, (first.answer_id,), {}, {}))
        assert worker.in_flight is not None and sink.committed == []
    run(go())


def test_an_answer_with_no_verdict_for_a_while_is_sent_again() -> None:
    async def go() -> None:
        now = [0.0]
        worker, channel, sink = _worker(now)
        sink.take(TP0, 0, 10)
        await worker.receive(Start("c", "r1", 1))
        now[0] = 30.0
        await worker.receive(Start("c", "r2", 1))
        assert not channel.of(Answer)[-1].carries
        now[0] = 61.0  # its verdict was lost, or the answer was
        await worker.receive(Start("c", "r3", 1))
        assert channel.of(Answer)[-1].answer_id == channel.of(Answer)[0].answer_id
        assert worker.stalled_for() == 61.0
    run(go())


def test_a_send_that_failed_is_sent_again_at_the_next_round() -> None:
    async def go() -> None:
        worker, channel, sink = _worker([0.0])
        sink.take(TP0, 0, 10)
        channel.fail_next = 1
        await worker.receive(Start("c", "r1", 1))
        assert channel.of(Answer) == [] and worker.in_flight is not None
        await worker.receive(Start("c", "r2", 1))
        [sent] = channel.of(Answer)
        assert sent.ranges == {TP0: (0, 10)} and sent.commit_id == "r2"
    run(go())


def test_rounds_of_an_older_coordinator_are_not_answered() -> None:
    async def go() -> None:
        worker, channel, sink = _worker([0.0])
        sink.assigned = {TP0, TP1}
        await worker.receive(Start("c", "r5", 5))
        await worker.receive(Start("c", "r4", 4))
        assert [a.commit_id for a in channel.of(Answer)] == ["r5"]
    run(go())
