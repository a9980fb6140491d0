"""Every worker's task of each connector: published by the herder that runs it, read by the REST API."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class TaskStatus:
    """One worker's task of one connector, as the status board holds it."""

    worker_id: str
    state: str
    trace: str | None = None
    topics: tuple[str, ...] = ()


class StatusBoard(Protocol):
    """Every worker's task of each connector. Standalone: only this daemon's."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def publish(self, connector: str, status: TaskStatus | None) -> None: ...

    def tasks(self, connector: str) -> list[TaskStatus]: ...  # sorted by worker_id


class LocalStatusBoard:
    """Standalone: this daemon's tasks are all there are."""

    def __init__(self) -> None:
        self._mine: dict[str, TaskStatus] = {}

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    def publish(self, connector: str, status: TaskStatus | None) -> None:
        if status is None:
            self._mine.pop(connector, None)
        else:
            self._mine[connector] = status

    def tasks(self, connector: str) -> list[TaskStatus]:
        return [self._mine[connector]] if connector in self._mine else []
