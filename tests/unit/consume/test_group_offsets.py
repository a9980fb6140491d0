"""The group's offsets, committed after the tables' in a task of their own."""

from __future__ import annotations

import asyncio
from typing import Any

from tabletopic.consume.group_offsets import GroupOffsetCommits
from tabletopic.core.topic_partition import TopicPartition

A, B = ("t", 0), ("t", 1)


class Log:
    def __init__(self) -> None:
        self.warnings: list[tuple[str, dict[str, Any]]] = []

    def warning(self, event: str, **fields: Any) -> None:
        self.warnings.append((event, fields))


class Broker:
    """Answers each commit when the test puts an answer: None for done, an exception for a failure."""

    def __init__(self) -> None:
        self.commits: list[dict[TopicPartition, int]] = []
        self.answer: asyncio.Queue[Exception | None] = asyncio.Queue()

    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        self.commits.append(dict(offsets))
        error = await self.answer.get()
        if error is not None:
            raise error


async def _until(condition: Any) -> None:
    """Let the event loop turn until ``condition`` holds; a bounded number of turns, so a bug fails the test."""
    for _ in range(10_000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("the condition never held")


async def _one_in_flight() -> tuple[Broker, Log, GroupOffsetCommits]:
    """Commits whose first, ``{A: 10}``, waits for the broker's answer."""
    broker, log = Broker(), Log()
    commits = GroupOffsetCommits(broker.commit, log)
    commits.submit({A: 10})  # returns at once: the round that committed does not wait for the broker
    await _until(lambda: len(broker.commits) == 1)
    return broker, log, commits


def test_offsets_handed_in_during_a_commit_go_merged_in_the_next() -> None:
    async def go() -> None:
        broker, log, commits = await _one_in_flight()
        commits.submit({A: 20, B: 5})
        commits.submit({A: 15, B: 7})
        await broker.answer.put(None)
        await _until(lambda: len(broker.commits) == 2)
        assert broker.commits == [{A: 10}, {A: 20, B: 7}]
        await broker.answer.put(None)
        await commits.close(60)
        assert log.warnings == []

    asyncio.run(go())


def test_a_failed_commits_offsets_go_with_the_next_rounds() -> None:
    async def go() -> None:
        broker, log = Broker(), Log()
        commits = GroupOffsetCommits(broker.commit, log)
        commits.submit({A: 10, B: 3})
        await broker.answer.put(RuntimeError("coordinator moved"))
        await _until(lambda: len(log.warnings) == 1)
        assert "coordinator moved" in log.warnings[0][1]["error"]
        commits.submit({A: 12})
        await broker.answer.put(None)
        await commits.close(60)
        assert broker.commits == [{A: 10, B: 3}, {A: 12, B: 3}]

    asyncio.run(go())


def test_close_waits_for_what_was_handed_in_and_takes_nothing_after() -> None:
    async def go() -> None:
        broker, _, commits = await _one_in_flight()
        commits.submit({A: 11})
        closing = asyncio.ensure_future(commits.close(60))
        await broker.answer.put(None)
        await broker.answer.put(None)
        await closing
        commits.submit({A: 12})
        await asyncio.sleep(0)
        assert broker.commits == [{A: 10}, {A: 11}]

    asyncio.run(go())


def test_a_commit_the_broker_never_answers_is_given_up_at_close() -> None:
    async def go() -> None:
        _, log, commits = await _one_in_flight()
        await commits.close(0)
        assert [event for event, _ in log.warnings] == [
            "consumer group offsets still uncommitted at stop; lag tools see the older ones"]

    asyncio.run(go())
