"""Distributed mode's config store: connector configurations and target states in ``config.storage.topic``.

The record keys and JSON values are Kafka Connect's own (its ``KafkaConfigBackingStore``,
with the internal JsonConverter's schemaless values):

    connector-<name>          {"properties": {...}}            null: the connector is deleted
    target-state-<name>       {"state": "PAUSED", "state.v2": "STOPPED"}
    restart-connector-<name>  {"include-tasks": true, "only-failed": false}

tabletopic adds ``"worker_id"`` to a restart that is for one worker's task, and
``topics-reset-<name>`` for ``PUT /connectors/{c}/topics/reset``.  Connect's task
records (``task-*``, ``commit-*``) and session keys are read past: a tabletopic
connector runs one task on every worker.

Every worker reads the topic from its beginning and applies the records in their one
order, so all of them reach the same state; a write returns once this worker has read
it back.  Concurrent writes to one connector on two workers are ordered by the topic:
the later one wins everywhere.  Restarts and topic resets are acted on only when they
are new, not when the topic is replayed at start-up.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import structlog

from tabletopic.connectors.config_store import (
    Change,
    ConnectorSpec,
    Listener,
    RestartRequest,
    TargetState,
    TopicsReset,
)
from tabletopic.kafka.clients import KafkaClients
from tabletopic.kafka.single_partition_topic import TopicLog

log = structlog.get_logger(__name__)
_CONNECTOR, _TARGET, _RESTART, _TOPICS = "connector-", "target-state-", "restart-connector-", "topics-reset-"


class ConfigTopicStore:
    def __init__(self, clients: KafkaClients, topic: str, replication: int) -> None:
        self.topic = topic
        self._log = TopicLog(clients, topic, self._apply, replication=replication)
        self._configs: dict[str, dict[str, str]] = {}
        self._targets: dict[str, TargetState] = {}
        self._listeners: list[Listener] = []
        self._replaying = True  # restarts and resets from before this worker started are history

    def connectors(self) -> dict[str, ConnectorSpec]:
        return {name: ConnectorSpec(name, config, self._targets.get(name, TargetState.RUNNING))
                for name, config in self._configs.items()}

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    async def start(self) -> None:
        await self._log.start()
        self._replaying = False
        log.info("connector configurations read", topic=self.topic, connectors=sorted(self._configs))

    async def stop(self) -> None:
        await self._log.stop()

    # -- writing ------------------------------------------------------------------------------------------
    async def _write(self, *records: tuple[str, Mapping[str, Any] | None]) -> None:
        await self._log.append([(key.encode(), None if value is None else json.dumps(value).encode())
                                for key, value in records])

    async def put(self, name: str, config: Mapping[str, str], target: TargetState | None = None) -> None:
        # The target state first, as Connect writes it: the connector starts in it, never briefly in another.
        records: list[tuple[str, Mapping[str, Any] | None]] = []
        if target is not None:
            records.append((_TARGET + name, _target_value(target)))
        records.append((_CONNECTOR + name, {"properties": dict(config)}))
        await self._write(*records)

    async def delete(self, name: str) -> None:
        await self._write((_CONNECTOR + name, None), (_TARGET + name, None))

    async def set_target(self, name: str, target: TargetState) -> None:
        await self._write((_TARGET + name, _target_value(target)))

    async def restart(self, request: RestartRequest) -> None:
        value: dict[str, Any] = {"include-tasks": request.include_tasks, "only-failed": request.only_failed}
        if request.worker_id is not None:
            value["worker_id"] = request.worker_id
        await self._write((_RESTART + request.connector, value))

    async def reset_topics(self, name: str) -> None:
        await self._write((_TOPICS + name, {"reset": True}))

    # -- reading ------------------------------------------------------------------------------------------
    def _apply(self, key: bytes | None, value: bytes | None, offset: int) -> None:
        try:
            change = self._read(key.decode() if key else "", json.loads(value) if value is not None else None)
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
            log.error("skipped an unreadable record in the config topic", topic=self.topic, offset=offset,
                      error=str(exc)[:200])
            return
        if change is not None:
            for listener in self._listeners:
                listener(change)

    def _read(self, key: str, value: Any) -> Change | None:
        if key.startswith(_CONNECTOR):
            name = key[len(_CONNECTOR):]
            if value is None:
                self._configs.pop(name, None)
                self._targets.pop(name, None)
            else:
                props = value["properties"]
                if not isinstance(props, dict):
                    raise TypeError("properties must be an object")
                self._configs[name] = {str(k): str(v) for k, v in props.items() if v is not None}
            return name
        if key.startswith(_TARGET):
            name = key[len(_TARGET):]
            if value is None:
                self._targets.pop(name, None)
                return None
            self._targets[name] = TargetState(value.get("state.v2") or value["state"])
            return name if name in self._configs else None
        if key.startswith(_RESTART) and value is not None and not self._replaying:
            return RestartRequest(key[len(_RESTART):], bool(value.get("include-tasks")),
                                  bool(value.get("only-failed")), value.get("worker_id"))
        if key.startswith(_TOPICS) and value is not None and not self._replaying:
            return TopicsReset(key[len(_TOPICS):])
        return None


def _target_value(target: TargetState) -> dict[str, str]:
    # Connect's v1 field knows only RUNNING and PAUSED: a stopped connector reads as paused to older workers.
    return {"state": "PAUSED" if target is TargetState.STOPPED else target.value, "state.v2": target.value}
