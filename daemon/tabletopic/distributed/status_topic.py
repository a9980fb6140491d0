"""Distributed mode's status board: every worker's task states, in ``status.storage.topic``.

Each worker publishes, per connector it runs, one record keyed
``status-task-<connector>-<worker_id>`` with its state (Connect's task states), its trace
and the topics it has read, and publishes it again every few seconds.  A worker that
stops publishes a tombstone; one that dies stops being refreshed and drops out once its
records are older, by this reader's own clock, than three heartbeats.  So every worker
can answer ``GET /connectors/{c}/status`` for the whole cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable

import structlog

from tabletopic.connectors.status_board import TaskStatus
from tabletopic.kafka.clients import KafkaClients
from tabletopic.kafka.single_partition_topic import TopicLog

log = structlog.get_logger(__name__)
HEARTBEAT_S = 3.0
_STALE_AFTER_S = 3 * HEARTBEAT_S
_PREFIX = "status-task-"


class StatusTopic:
    def __init__(self, clients: KafkaClients, topic: str, replication: int, worker_id: str,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.worker_id = worker_id
        self._log = TopicLog(clients, topic, self._apply, replication=replication)
        self._clock = clock
        self._mine: dict[str, TaskStatus] = {}
        self._seen: dict[tuple[str, str], tuple[TaskStatus, float]] = {}  # (connector, worker) -> status, read at
        self._dirty: set[str] = set()
        self._wake = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None  # owned: cancelled and awaited in stop()

    async def start(self) -> None:
        await self._log.start()
        self._writer = asyncio.get_running_loop().create_task(self._write_loop(), name="status-writer")

    async def stop(self) -> None:
        if self._writer is not None:
            self._writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._writer
        with contextlib.suppress(Exception):  # leaving: our tasks are gone now, not in three heartbeats
            await self._log.append([(_key(c, self.worker_id), None) for c in self._mine], timeout_s=5.0)
        await self._log.stop()

    def publish(self, connector: str, status: TaskStatus | None) -> None:
        if status is None:
            if self._mine.pop(connector, None) is None:
                return
        else:
            self._mine[connector] = status
        self._dirty.add(connector)
        self._wake.set()

    def tasks(self, connector: str) -> list[TaskStatus]:
        now = self._clock()
        out = {w: s for (c, w), (s, at) in self._seen.items() if c == connector and now - at < _STALE_AFTER_S}
        if connector in self._mine:
            out[self.worker_id] = self._mine[connector]
        else:
            out.pop(self.worker_id, None)
        return [out[w] for w in sorted(out)]

    async def _write_loop(self) -> None:
        while True:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), HEARTBEAT_S)
            self._wake.clear()
            dirty, self._dirty = self._dirty, set()
            records = [(_key(c, self.worker_id), None if c not in self._mine else _value(c, self._mine[c]))
                       for c in sorted(dirty | set(self._mine))]
            try:
                await self._log.append(records)
            except Exception as exc:  # the broker: the next heartbeat tries again; statuses age meanwhile
                self._dirty |= dirty
                log.warning("could not publish task statuses", error=str(exc) or type(exc).__name__)

    def _apply(self, key: bytes | None, value: bytes | None, offset: int) -> None:
        text = key.decode(errors="replace") if key else ""
        if not text.startswith(_PREFIX):
            return
        try:
            doc = json.loads(value) if value is not None else None
            if doc is None:
                self._seen = {k: v for k, v in self._seen.items() if _key(*k).decode() != text}
                return
            status = TaskStatus(str(doc["worker_id"]), str(doc["state"]), doc.get("trace"),
                                tuple(str(t) for t in doc.get("topics", ())))
            self._seen[(str(doc["connector"]), status.worker_id)] = (status, self._clock())
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
            log.warning("skipped an unreadable record in the status topic", offset=offset, error=str(exc)[:200])


def _key(connector: str, worker_id: str) -> bytes:
    return f"{_PREFIX}{connector}-{worker_id}".encode()


def _value(connector: str, status: TaskStatus) -> bytes:
    return json.dumps({"connector": connector, "worker_id": status.worker_id, "state": status.state,
                       "trace": status.trace, "topics": list(status.topics)}).encode()
