"""What the REST API asks of the connectors: configuration writes, restarts, offsets, and the states it shows.

As in Kafka Connect, a request never touches a runtime: a write goes to the config store, and the
herder drives the runtimes from there (:mod:`tabletopic.connectors.herder`).  What is shown is read from
the store, the herder's runtimes and the status board.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import structlog

from tabletopic.config.connector import ConnectorConfig
from tabletopic.config.connector_keys import CONNECTOR_CLASSES
from tabletopic.config.definition import ConfigError, Problem
from tabletopic.config.files import as_text
from tabletopic.connectors.config_store import ConnectorSpec, RestartRequest, TargetState
from tabletopic.connectors.herder import Herder
from tabletopic.connectors.offsets import OffsetChanges, OffsetsChangeRefused, TableOffsets, change_offsets
from tabletopic.connectors.refusals import AlreadyExists, BadRequest, NotFound, NotReady
from tabletopic.connectors.runtime import FAILED, UNASSIGNED
from tabletopic.connectors.status_board import TaskStatus
from tabletopic.consume.group_offsets import committed_offsets
from tabletopic.core.topic_partition import TopicPartition
from tabletopic.offsets.resume import tables_resume

log = structlog.get_logger(__name__)


class ConnectorRequests:
    """The REST API's view of one worker's connectors, over its herder."""

    def __init__(self, herder: Herder) -> None:
        self._herder = herder

    @property
    def worker_id(self) -> str:
        return self._herder.worker_id

    def names(self) -> list[str]:
        self._store_read()
        return sorted(self._herder.store.connectors())

    # -- configurations --------------------------------------------------------------------------------
    def problems_of(self, config: Mapping[str, str]) -> tuple[list[Problem], list[str]]:
        """Every problem of a configuration, as ``PUT /connector-plugins/.../config/validate`` lists them, and its
        warnings (keys nothing reads, each with the key it may misspell)."""
        try:
            parsed = self._herder.parse(config)
        except ConfigError as exc:
            return list(exc.problems), exc.warnings
        problems = []
        for running in self._herder.runtimes.values():
            if running.name != parsed.name and running.config.catalog_name == parsed.catalog_name and \
                    running.config.catalog_props != parsed.catalog_props:
                problems.append(Problem("iceberg.catalog", parsed.catalog_name,
                                        f"connector {running.name} in this worker uses this catalog name with "
                                        "other iceberg.catalog.* properties; give this one another name"))
        return problems, parsed.warnings

    def _validated(self, name: str, config: Mapping[str, Any]) -> tuple[dict[str, str], list[str]]:
        """The configuration as it is stored, and its warnings; BadRequest with every problem it has."""
        written = {str(k): as_text(v) for k, v in config.items() if v is not None}
        if written.get("name", name) != name:
            raise BadRequest(f"Connector name configuration ({written['name']}) doesn't match connector name in "
                             f"the URL ({name})")
        written["name"] = name
        written.setdefault("connector.class", CONNECTOR_CLASSES[0])
        problems, warnings = self.problems_of(written)
        if problems:
            lines = "".join(f"\n{p}" for p in problems)
            told = "".join(f"\nwarning: {w}" for w in warnings)
            raise BadRequest(f"Connector configuration is invalid and contains the following {len(problems)} "
                             f"error(s):{lines}\nYou can also find the above list of errors at the endpoint "
                             f"`/connector-plugins/{{connectorType}}/config/validate`{told}")
        if not self._herder.started:
            # Taken before the JVM is up: it must start with the jars this connector's catalog needs.
            catalog = self._herder.parse(written).catalog
            self._herder.spark.require(catalog.needs_lake_jars, catalog.driver_jars)
        return written, warnings

    def _ready_for_writes(self) -> None:
        if self._herder.closing:
            raise NotReady("the worker is shutting down")
        self._store_read()

    def _store_read(self) -> None:
        """Before the store is read, no answer about the connectors is true: a client that waits for the list
        (as provisioning scripts do) may then write at once."""
        if not (self._herder.started or self._herder.configs_read):
            raise NotReady("the worker is still reading its connectors' configurations; try again in a moment")

    def spec(self, name: str) -> ConnectorSpec:
        self._store_read()
        spec = self._herder.store.connectors().get(name)
        if spec is None:
            raise NotFound(f"Connector {name} not found")
        return spec

    async def create(self, name: str, config: Mapping[str, Any],
                     initial: TargetState | None) -> tuple[ConnectorSpec, list[str]]:
        self._ready_for_writes()
        if not name or name != name.strip() or any(ord(c) < 32 for c in name):
            raise BadRequest("Connector name must be non-empty, without control characters or surrounding spaces")
        written, warnings = self._validated(name, config)
        if name in self._herder.store.connectors():
            raise AlreadyExists(f"Connector {name} already exists")
        await self._herder.store.put(name, written, initial or TargetState.RUNNING)
        return self.spec(name), warnings

    async def put_config(self, name: str, config: Mapping[str, Any]) -> tuple[ConnectorSpec, bool, list[str]]:
        self._ready_for_writes()
        written, warnings = self._validated(name, config)
        created = name not in self._herder.store.connectors()
        await self._herder.store.put(name, written)
        return self.spec(name), created, warnings

    async def patch_config(self, name: str, patch: Mapping[str, Any]) -> tuple[ConnectorSpec, list[str]]:
        self._ready_for_writes()
        merged: dict[str, Any] = dict(self.spec(name).config)
        for key, value in patch.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
        written, warnings = self._validated(name, merged)
        await self._herder.store.put(name, written)
        return self.spec(name), warnings

    async def delete(self, name: str) -> None:
        self._ready_for_writes()
        self.spec(name)
        await self._herder.store.delete(name)

    async def set_target(self, name: str, target: TargetState) -> None:
        self._ready_for_writes()
        self.spec(name)
        await self._herder.store.set_target(name, target)

    async def restart(self, name: str, include_tasks: bool, only_failed: bool) -> None:
        self._ready_for_writes()
        self.spec(name)
        await self._herder.store.restart(RestartRequest(name, include_tasks, only_failed))

    async def restart_task(self, name: str, task: int) -> None:
        self._ready_for_writes()
        self.spec(name)
        tasks = self.tasks(name)
        if not 0 <= task < len(tasks):
            raise NotFound(f"Task {name}-{task} not found")
        await self._herder.store.restart(RestartRequest(name, True, False, tasks[task].worker_id))

    async def reset_topics(self, name: str) -> None:
        self._ready_for_writes()
        self.spec(name)
        await self._herder.store.reset_topics(name)

    # -- what the REST API shows -------------------------------------------------------------------------
    def tasks(self, name: str) -> list[TaskStatus]:
        spec = self.spec(name)
        runtime = self._herder.runtimes.get(name)
        if (spec.target is TargetState.STOPPED and runtime is None) or not self._herder.started:
            return []  # while starting, the board of the workers' statuses may not be read yet
        if runtime is not None:
            self._herder.publish(runtime)  # its topics change without its state changing
        return sorted(self._herder.board.tasks(name), key=lambda t: t.worker_id)

    def status(self, name: str) -> tuple[str, str | None, list[TaskStatus]]:
        """A connector's state, its trace and its tasks, from one read of the workers' statuses: the
        state shown is the one its tasks shown beside it agree on."""
        tasks = self.tasks(name)
        return (*self._connector_state(name, tasks), tasks)

    def _connector_state(self, name: str, tasks: list[TaskStatus]) -> tuple[str, str | None]:
        spec = self.spec(name)
        if name in self._herder.problems:
            return FAILED, self._herder.problems[name]
        if not self._herder.started and spec.target is not TargetState.STOPPED:
            return UNASSIGNED, "the worker is still starting; the connector runs once it is up"
        runtime = self._herder.runtimes.get(name)
        if spec.target is TargetState.STOPPED:
            # Still stopping (its final commit, leaving the group): STOPPED once its runtime is gone, as
            # Connect shows it, so that a client waiting for STOPPED may then change its offsets.
            return (runtime.state if runtime is not None else spec.target.value), None
        return state_of_tasks(spec.target, [t.state for t in tasks])

    def topics(self, name: str) -> list[str]:
        return sorted({t for task in self.tasks(name) for t in task.topics})

    def connector_states(self) -> dict[str, tuple[str, bool]]:
        """Each connector's state here (its task's on this worker, else its own) and whether it is ready."""
        reasons = self.ready()
        out = {}
        for name, spec in self._herder.store.connectors().items():
            runtime = self._herder.runtimes.get(name)
            state = FAILED if name in self._herder.problems else runtime.state if runtime is not None else \
                spec.target.value if spec.target is TargetState.STOPPED else UNASSIGNED
            out[name] = (state, name not in reasons)
        return out

    def ready(self) -> dict[str, str]:
        """Why each connector that is not ready is not (/ready answers 503 while any is not)."""
        reasons = {}
        for name, spec in self._herder.store.connectors().items():
            if spec.target is TargetState.STOPPED:
                continue
            runtime = self._herder.runtimes.get(name)
            if name in self._herder.problems:
                reasons[name] = self._herder.problems[name]
            elif runtime is None:
                reasons[name] = "starting"
            else:
                ok, why = runtime.ready()
                if not ok:
                    reasons[name] = why
        return reasons

    # -- offsets ------------------------------------------------------------------------------------------
    def _jvm_ready(self) -> None:
        if not self._herder.started:
            raise NotReady("the worker is still starting its JVM, which reading or changing offsets needs")

    async def offsets(self, name: str) -> dict[TopicPartition, int]:
        """Where the connector resumes each partition its tables name, by the sink's own rule: the tables'
        offsets and round starts, and the consumer group's offsets."""
        self._jvm_ready()
        config = self._config_of(name)
        reader = await asyncio.to_thread(TableOffsets, self._herder.spark, config)
        try:
            recorded = await asyncio.to_thread(reader.read)
        finally:
            reader.close()
        clients = config.clients_of(self._herder.kafka)
        group = await committed_offsets(clients, config.group_id, tables_resume(recorded))  # the partitions named
        return tables_resume(recorded, group)

    async def change_offsets(self, name: str, changes: OffsetChanges | None) -> None:
        """Alter (or, with None, reset) the offsets: the connector must be STOPPED and its group empty."""
        self._ready_for_writes()
        self._jvm_ready()
        spec = self.spec(name)
        if spec.target is not TargetState.STOPPED or name in self._herder.runtimes:
            raise BadRequest("Connectors must be in the STOPPED state before their offsets can be modified. This "
                             f"can be done for the specified connector by issuing a 'PUT' request to the "
                             f"'/connectors/{name}/stop' endpoint")
        config = self._config_of(name)
        clients = config.clients_of(self._herder.kafka)
        try:
            positions = await change_offsets(self._herder.spark, clients, config, changes)
        except OffsetsChangeRefused as exc:
            raise BadRequest(str(exc)) from exc
        log.info("connector offsets changed in its tables and consumer group", connector=name,
                 reset=changes is None, positions={f"{t}[{p}]": o for (t, p), o in sorted(positions.items())})

    def _config_of(self, name: str) -> ConnectorConfig:
        spec = self.spec(name)
        try:
            return self._herder.parse(spec.config)
        except ConfigError as exc:
            raise BadRequest(str(exc)) from exc


def state_of_tasks(target: TargetState, tasks: list[str]) -> tuple[str, str | None]:
    """A running or paused connector's state, as its tasks show it.

    Tools that show tasks beside their connector (Kafka UIs, the healthcheck sidecar) must never see a
    RUNNING connector whose only task is UNASSIGNED, or a PAUSED one whose task still runs. So the
    connector shows what its live tasks agree on, and its target only while they disagree (a pause or
    a resume reaching several workers). Failed tasks leave it RUNNING, as Connect shows a connector
    whose tasks failed.
    """
    if not tasks:
        return UNASSIGNED, "no worker runs its task yet"
    live = {s for s in tasks if s != FAILED}
    return (live.pop() if len(live) == 1 else target.value), None
