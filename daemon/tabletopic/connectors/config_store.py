"""What should run: each connector's configuration, as written, and its target state.

Kafka Connect keeps the same two things per connector, in memory in standalone mode and
in the compacted ``config.storage.topic`` in distributed mode
(:class:`tabletopic.distributed.config_topic.ConfigTopicStore`).  The herder never
changes a runtime directly: it writes here, and drives the runtimes to what the store
says once the change has been read back, so that every worker of a cluster applies
the same changes in the same order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Protocol


class TargetState(str, Enum):
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    STOPPED = "STOPPED"


@dataclass(frozen=True)
class ConnectorSpec:
    name: str
    config: Mapping[str, str]  # as written: config provider placeholders are kept
    target: TargetState


@dataclass(frozen=True)
class RestartRequest:
    """Connect's restart: ``include_tasks`` and ``only_failed``, or one worker's task (``worker_id``)."""

    connector: str
    include_tasks: bool = False
    only_failed: bool = False
    worker_id: str | None = None


@dataclass(frozen=True)
class TopicsReset:
    """``PUT /connectors/{c}/topics/reset``: every worker forgets the topics the connector has used."""

    connector: str


# What changed: a connector's name (its spec is read from the store), or a request to act on.
Change = str | RestartRequest | TopicsReset
Listener = Callable[[Change], None]


class ConfigStore(Protocol):
    def connectors(self) -> dict[str, ConnectorSpec]: ...

    def subscribe(self, listener: Listener) -> None: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def put(self, name: str, config: Mapping[str, str], target: TargetState | None = None) -> None: ...

    async def delete(self, name: str) -> None: ...

    async def set_target(self, name: str, target: TargetState) -> None: ...

    async def restart(self, request: RestartRequest) -> None: ...

    async def reset_topics(self, name: str) -> None: ...


class MemoryConfigStore:
    """Standalone mode: connectors from the command line's files, and those created over REST, until exit."""

    def __init__(self, initial: Mapping[str, Mapping[str, str]] | None = None) -> None:
        self._specs = {name: ConnectorSpec(name, dict(config), TargetState.RUNNING)
                       for name, config in (initial or {}).items()}
        self._listeners: list[Listener] = []

    def connectors(self) -> dict[str, ConnectorSpec]:
        return dict(self._specs)

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    def _changed(self, change: Change) -> None:
        for listener in self._listeners:
            listener(change)

    async def put(self, name: str, config: Mapping[str, str], target: TargetState | None = None) -> None:
        old = self._specs.get(name)
        self._specs[name] = ConnectorSpec(name, dict(config), target or (old.target if old else TargetState.RUNNING))
        self._changed(name)

    async def delete(self, name: str) -> None:
        if self._specs.pop(name, None) is not None:
            self._changed(name)

    async def set_target(self, name: str, target: TargetState) -> None:
        old = self._specs.get(name)
        if old is not None and old.target is not target:
            self._specs[name] = ConnectorSpec(name, old.config, target)
            self._changed(name)

    async def restart(self, request: RestartRequest) -> None:
        self._changed(request)

    async def reset_topics(self, name: str) -> None:
        self._changed(TopicsReset(name))
