"""Fakes for the protocol's unit tests: a channel, tables and a sink that live in memory."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterable
from typing import Any

from prometheus_client import CollectorRegistry

from tabletopic.commit.events import Answer, Message
from tabletopic.commit.table_commits import RoundOutcome
from tabletopic.core.topic_partition import TopicPartition
from tabletopic.observe.metrics import SinkMetrics
from tabletopic.write.table_committer import CommitFailed, CommitFenced
from tabletopic.write.write_result import TableFiles, WriteResult

TP0, TP1 = ("t", 0), ("t", 1)


def metrics() -> SinkMetrics:
    return SinkMetrics(CollectorRegistry(), "c")


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(coro)


async def settle(rounds: int = 20) -> None:
    """Let every ready task run; no timer fires, so nothing here depends on the clock."""
    for _ in range(rounds):
        await asyncio.sleep(0)


class FakeChannel:
    def __init__(self) -> None:
        self.sent: list[Message] = []
        self.fail_next = 0

    async def send(self, message: Message) -> None:
        if self.fail_next:
            self.fail_next -= 1
            raise ConnectionError("broker gone")
        self.sent.append(message)

    def of(self, kind: type) -> list[Any]:
        return [m for m in self.sent if isinstance(m, kind)]


class FakeTables:
    """Tables that record offsets and files; a commit can be made to fail or to be fenced."""

    def __init__(self) -> None:
        self.offsets: dict[str, dict[TopicPartition, int]] = {}
        self.files: dict[str, list[str]] = {}
        self.fail: CommitFailed | None = None
        self.fence = False

    def recorded(self, names: Iterable[str] = ()) -> dict[str, dict[TopicPartition, int]]:
        return {t: dict(o) for t, o in self.offsets.items()}

    def reset(self) -> None:
        pass

    async def off_loop(self, call: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.to_thread(call, *args)

    def clean(self) -> dict[str, dict[TopicPartition, int]]:
        return {}

    def invalid_files(self, answer: Answer) -> str | None:
        bad = [f["file-path"] for t in answer.tables.values() for f in t.files if not f["file-path"].startswith("/wh/")]
        return f"not under the table: {bad}" if bad else None

    async def commit(self, positions: dict[TopicPartition, int], starts: dict[TopicPartition, int],
                     by_table: dict[str, TableFiles], started: float, epoch: int, task: str = "") -> RoundOutcome:
        if self.fail or self.fence:
            return RoundOutcome(failed={t: self.fail or CommitFenced("fenced") for t in by_table}, fenced=self.fence)
        outcome = RoundOutcome()
        for table, files in by_table.items():
            self.offsets[table] = {**self.offsets.get(table, {}), **positions}
            self.files.setdefault(table, []).extend(f["file-path"] for f in files.files)
            outcome.snapshots[table] = len(self.files[table])
        outcome.recorded = self.recorded()
        return outcome


def files(*paths: str, records: int = 1) -> TableFiles:
    return TableFiles([{"file-path": p, "content": "data"} for p in paths], records, None)


def answer(answer_id: str, commit_id: str | None, assigned: Iterable[TopicPartition] = (),
           ranges: dict[TopicPartition, tuple[int, int]] | None = None,
           floors: dict[str, dict[TopicPartition, int]] | None = None, tables: dict[str, TableFiles] | None = None,
           epoch: int = 1, member: str = "w") -> Answer:
    return Answer("c", answer_id, commit_id, member, epoch, frozenset(assigned), ranges or {}, floors or {},
                  tables or {})


class FakeSink:
    """A sink with rows waiting per partition: each write takes them all."""

    def __init__(self, assigned: Iterable[TopicPartition]) -> None:
        self.assigned = set(assigned)
        self.positions: dict[TopicPartition, int] = {}
        self.starts: dict[TopicPartition, int] = {}
        self.committed: list[dict[TopicPartition, int]] = []
        self.rejected: list[str] = []
        self.writes = 0

    def take(self, tp: TopicPartition, first: int, end: int) -> None:
        self.starts.setdefault(tp, first)
        self.positions[tp] = end

    async def complete_write(self, reason: str) -> WriteResult | None:
        self.writes += 1
        if all(self.starts.get(tp) == end for tp, end in self.positions.items()):  # nothing taken since
            return WriteResult({}, {}, {}, {}, {})
        result = WriteResult(dict(self.positions), dict(self.starts), {"db.t": {}},
                             {"db.t": files(f"/wh/{self.writes}.parquet")}, {"db.t": {}})
        self.starts = {tp: end for tp, end in self.positions.items()}
        return result

    async def answer_committed(self, ends: dict[TopicPartition, int],
                               offsets: dict[str, dict[TopicPartition, int]]) -> None:
        self.committed.append(ends)

    async def answer_rejected(self, why: str) -> None:
        self.rejected.append(why)

    def adopt(self, offsets: dict[str, dict[TopicPartition, int]]) -> None:
        pass

