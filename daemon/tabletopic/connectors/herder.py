"""The herder: drives each connector's runtime to what the config store says, and answers the REST API.

As in Kafka Connect, a REST call never touches a runtime: it writes the store
(:mod:`tabletopic.connectors.config_store`), and the store tells every herder reading
it, this one included, what changed.  Each connector then has one driver task that
applies its changes one at a time, in the store's order: a new configuration restarts
the runtime, a target state pauses, resumes or stops it, a restart request replaces it.

One task per connector per daemon: its id is its place among the workers that run
the connector (always 0 in standalone mode), and its ``worker_id`` names the daemon.
What the other workers of a cluster run is read from a :class:`StatusBoard`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from tabletopic.config.connector import CONNECTOR_CLASSES, ConnectorConfig, parse_connector
from tabletopic.config.definition import ConfigError, Problem
from tabletopic.config.files import as_text
from tabletopic.config.worker import WorkerConfig
from tabletopic.connectors.config_store import (
    Change,
    ConfigStore,
    ConnectorSpec,
    RestartRequest,
    TargetState,
    TopicsReset,
)
from tabletopic.connectors.offsets import OffsetChanges, OffsetsChangeRefused, TableOffsets, change_offsets
from tabletopic.connectors.runtime import FAILED, RESTARTING, UNASSIGNED, ConnectorRuntime
from tabletopic.kafka_clients import KafkaClients
from tabletopic.offsets.resume import tables_resume
from tabletopic.write.spark_session import SparkRuntime

log = structlog.get_logger(__name__)


class HerderError(Exception):
    """A request the herder refuses; ``status`` is the HTTP status Connect answers it with."""

    status = 500


class NotFound(HerderError):
    status = 404


class AlreadyExists(HerderError):
    status = 409


class BadRequest(HerderError):
    status = 400


class NotReady(HerderError):
    status = 503


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


NewRuntime = Callable[[ConnectorConfig, Callable[[ConnectorRuntime], None]], ConnectorRuntime]


class Herder:
    def __init__(self, worker: WorkerConfig, worker_id: str, store: ConfigStore, board: StatusBoard,
                 spark: SparkRuntime, kafka: KafkaClients, new_runtime: NewRuntime,
                 on_fatal: Callable[[int], None]) -> None:
        self.worker = worker
        self.worker_id = worker_id
        self.store = store
        self.board = board
        self._spark = spark
        self._kafka = kafka
        self._new_runtime = new_runtime
        self._on_fatal = on_fatal
        self.runtimes: dict[str, ConnectorRuntime] = {}
        self.problems: dict[str, str] = {}  # connectors whose stored configuration does not parse here
        self.probed: set[str] = set()  # connectors whose clients the daemon checked before starting them
        self._drivers: dict[str, asyncio.Task[None]] = {}  # owned: cancelled and awaited in stop()
        self._dirty: dict[str, asyncio.Event] = {}
        self._requests: dict[str, list[RestartRequest]] = {}
        self._busy: set[str] = set()  # connectors whose driver is applying a change
        self._published: dict[str, TaskStatus] = {}  # what this worker last put on the board
        self.started = False
        # Configuration writes are taken once the store is read, before the JVM is up: the connectors
        # run when the worker is ready, as Connect applies what its config topic holds.
        self.accepting_writes = False
        self._closing = False
        store.subscribe(self._on_change)

    # -- driving the runtimes -------------------------------------------------------------------------
    async def start(self) -> None:
        self.started = True
        for name in self.store.connectors():
            self._kick(name)

    async def wait_started(self) -> None:
        """Until every driver has applied what it was asked: each connector started, paused, failed or stopped."""
        while any(self._dirty[n].is_set() or n in self._busy for n in list(self._dirty)):
            await asyncio.sleep(0.05)

    def _on_change(self, change: Change) -> None:
        if isinstance(change, TopicsReset):
            runtime = self.runtimes.get(change.connector)
            if runtime is not None:
                runtime.reset_topics()
                self._publish(runtime)
            return
        name = change if isinstance(change, str) else change.connector
        if isinstance(change, RestartRequest):
            if change.worker_id not in (None, self.worker_id):
                return
            self._requests.setdefault(name, []).append(change)
        if self.started and not self._closing:
            self._kick(name)

    def _kick(self, name: str) -> None:
        self._dirty.setdefault(name, asyncio.Event()).set()
        driver = self._drivers.get(name)
        if driver is None or driver.done():
            self._drivers[name] = asyncio.get_running_loop().create_task(self._drive(name), name=f"drive-{name}")

    async def _drive(self, name: str) -> None:
        dirty = self._dirty[name]
        while not self._closing:
            await dirty.wait()
            dirty.clear()
            self._busy.add(name)
            try:
                if not await self._apply(name):
                    return
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a bug of ours must not leave the connector half-driven and silent
                log.exception("could not apply a connector change", connector=name)
                self.problems[name] = f"could not apply the change: {exc}"
                self._put(name, TaskStatus(self.worker_id, FAILED, self.problems[name]))
            finally:
                self._busy.discard(name)

    async def _apply(self, name: str) -> bool:
        """Bring ``name`` to what the store says; False once it is deleted (its driver ends)."""
        spec = self.store.connectors().get(name)
        requests, self._requests[name] = self._requests.get(name, []), []
        runtime = self.runtimes.get(name)
        if spec is None or spec.target is TargetState.STOPPED:
            if runtime is not None:
                await self._stop(runtime)
                self.runtimes.pop(name, None)
            self._unpublish(name)
            self.problems.pop(name, None)
            if spec is None:
                self._dirty.pop(name, None)
                self._requests.pop(name, None)
                log.info("connector deleted", connector=name)
                return False
            log.info("connector stopped", connector=name)
            return True
        try:
            config = self.parse(spec.config)
        except ConfigError as exc:
            if runtime is not None:
                await self._stop(runtime)
                self.runtimes.pop(name, None)
            self.problems[name] = str(exc)
            self._put(name, TaskStatus(self.worker_id, FAILED, str(exc)))
            log.error("connector configuration is invalid", connector=name, error=str(exc))
            return True
        self.problems.pop(name, None)
        if runtime is not None and (dict(runtime.config.written) != dict(spec.config) or
                                    any(not r.only_failed or runtime.state == FAILED for r in requests)):
            runtime.state = RESTARTING
            self._publish(runtime)
            await self._stop(runtime)
            runtime = None
        if runtime is None:
            runtime = self._new_runtime(config, self._on_runtime_change)
            self.runtimes[name] = runtime
            await runtime.start(paused=spec.target is TargetState.PAUSED, probe=name not in self.probed)
            self.probed.discard(name)
        elif runtime.state == FAILED:
            await self._stop(runtime)  # its final commit keeps what it took before failing
        elif spec.target is TargetState.PAUSED:
            await runtime.pause()
        else:
            runtime.resume()
        return True

    def _on_runtime_change(self, runtime: ConnectorRuntime) -> None:
        self._publish(runtime)
        if runtime.state != FAILED or self._closing:
            return
        if self.worker.exit_on_connector_failure:
            self._on_fatal(runtime.exit_code)
        elif self.runtimes.get(runtime.name) is runtime:
            self._kick(runtime.name)  # its driver stops it; it stays FAILED until restarted

    def _publish(self, runtime: ConnectorRuntime) -> None:
        """Put this worker's task of ``runtime`` on the board, if it changed (the topics it read, say)."""
        if self.runtimes.get(runtime.name, runtime) is not runtime:
            return  # an old runtime, replaced meanwhile
        self._put(runtime.name, TaskStatus(self.worker_id, runtime.state, runtime.trace,
                                           tuple(sorted(runtime.active_topics))))

    def _put(self, name: str, status: TaskStatus) -> None:
        if self._published.get(name) != status:
            self._published[name] = status
            self.board.publish(name, status)

    def _unpublish(self, name: str) -> None:
        self._published.pop(name, None)
        self.board.publish(name, None)

    async def _stop(self, runtime: ConnectorRuntime, final_commit: bool = True) -> int:
        return await runtime.stop(self.worker.shutdown_timeout_ms / 1000, final_commit)

    async def stop(self, final_commit: bool = True) -> int:
        """Stop every connector together, so the whole fits the stop timeout however many there are."""
        self._closing = True
        drivers = list(self._drivers.values())
        for driver in drivers:
            driver.cancel()
        await asyncio.gather(*drivers, return_exceptions=True)
        codes = await asyncio.gather(*(self._stop(r, final_commit) for r in list(self.runtimes.values())))
        for name in list(self.runtimes):
            self._unpublish(name)
        return max([0, *codes])

    # -- configurations --------------------------------------------------------------------------------
    def parse(self, config: Mapping[str, str]) -> ConnectorConfig:
        return parse_connector(config, self.worker)

    def problems_of(self, config: Mapping[str, str]) -> list[Problem]:
        """Every problem of a configuration, as ``PUT /connector-plugins/.../config/validate`` lists them."""
        try:
            parsed = self.parse(config)
        except ConfigError as exc:
            return list(exc.problems)
        problems = []
        for running in self.runtimes.values():
            if running.name != parsed.name and running.config.catalog_name == parsed.catalog_name and \
                    running.config.catalog_props != parsed.catalog_props:
                problems.append(Problem("iceberg.catalog", parsed.catalog_name,
                                        f"connector {running.name} in this worker uses this catalog name with "
                                        "other iceberg.catalog.* properties; give this one another name"))
        return problems

    def _validated(self, name: str, config: Mapping[str, Any]) -> dict[str, str]:
        written = {str(k): as_text(v) for k, v in config.items() if v is not None}
        if written.get("name", name) != name:
            raise BadRequest(f"Connector name configuration ({written['name']}) doesn't match connector name in "
                             f"the URL ({name})")
        written["name"] = name
        written.setdefault("connector.class", CONNECTOR_CLASSES[0])
        problems = self.problems_of(written)
        if problems:
            lines = "".join(f"\n{p}" for p in problems)
            raise BadRequest(f"Connector configuration is invalid and contains the following {len(problems)} "
                             f"error(s):{lines}\nYou can also find the above list of errors at the endpoint "
                             "`/connector-plugins/{connectorType}/config/validate`")
        if not self.started:
            # Taken before the JVM is up: it must start with the jars this connector's catalog needs.
            catalog = self.parse(written).catalog
            self._spark.require(catalog.needs_lake_jars, catalog.driver_jars)
        return written

    def _ready_for_writes(self) -> None:
        if self._closing:
            raise NotReady("the worker is shutting down")
        if not (self.started or self.accepting_writes):
            raise NotReady("the worker is still reading its connectors' configurations; try again in a moment")

    def spec(self, name: str) -> ConnectorSpec:
        spec = self.store.connectors().get(name)
        if spec is None:
            raise NotFound(f"Connector {name} not found")
        return spec

    async def create(self, name: str, config: Mapping[str, Any], initial: TargetState | None) -> ConnectorSpec:
        self._ready_for_writes()
        if not name or name != name.strip() or any(ord(c) < 32 for c in name):
            raise BadRequest("Connector name must be non-empty, without control characters or surrounding spaces")
        written = self._validated(name, config)
        if name in self.store.connectors():
            raise AlreadyExists(f"Connector {name} already exists")
        await self.store.put(name, written, initial or TargetState.RUNNING)
        return self.spec(name)

    async def put_config(self, name: str, config: Mapping[str, Any]) -> tuple[ConnectorSpec, bool]:
        self._ready_for_writes()
        written = self._validated(name, config)
        created = name not in self.store.connectors()
        await self.store.put(name, written)
        return self.spec(name), created

    async def patch_config(self, name: str, patch: Mapping[str, Any]) -> ConnectorSpec:
        self._ready_for_writes()
        merged: dict[str, Any] = dict(self.spec(name).config)
        for key, value in patch.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
        await self.store.put(name, self._validated(name, merged))
        return self.spec(name)

    async def delete(self, name: str) -> None:
        self._ready_for_writes()
        self.spec(name)
        await self.store.delete(name)

    async def set_target(self, name: str, target: TargetState) -> None:
        self._ready_for_writes()
        self.spec(name)
        await self.store.set_target(name, target)

    async def restart(self, name: str, include_tasks: bool, only_failed: bool) -> None:
        self._ready_for_writes()
        self.spec(name)
        await self.store.restart(RestartRequest(name, include_tasks, only_failed))

    async def restart_task(self, name: str, task: int) -> None:
        self._ready_for_writes()
        self.spec(name)
        tasks = self.tasks(name)
        if not 0 <= task < len(tasks):
            raise NotFound(f"Task {name}-{task} not found")
        await self.store.restart(RestartRequest(name, True, False, tasks[task].worker_id))

    async def reset_topics(self, name: str) -> None:
        self._ready_for_writes()
        self.spec(name)
        await self.store.reset_topics(name)

    # -- what the REST API shows -------------------------------------------------------------------------
    def tasks(self, name: str) -> list[TaskStatus]:
        spec = self.spec(name)
        runtime = self.runtimes.get(name)
        if (spec.target is TargetState.STOPPED and runtime is None) or not self.started:
            return []  # while starting, the board of the workers' statuses may not be read yet
        if runtime is not None:
            self._publish(runtime)  # its topics change without its state changing
        return sorted(self.board.tasks(name), key=lambda t: t.worker_id)

    def connector_state(self, name: str) -> tuple[str, str | None]:
        spec = self.spec(name)
        if name in self.problems:
            return FAILED, self.problems[name]
        if not self.started and spec.target is not TargetState.STOPPED:
            return UNASSIGNED, "the worker is still starting; the connector runs once it is up"
        runtime = self.runtimes.get(name)
        if spec.target is TargetState.STOPPED and runtime is not None:
            # Still stopping (its final commit, leaving the group): STOPPED once its runtime is gone, as
            # Connect shows it, so that a client waiting for STOPPED may then change its offsets.
            return runtime.state, None
        return spec.target.value, None

    def topics(self, name: str) -> list[str]:
        return sorted({t for task in self.tasks(name) for t in task.topics})

    def connector_states(self) -> dict[str, tuple[str, bool]]:
        """Each connector's state here (its task's on this worker, else its own) and whether it is ready."""
        reasons = self.ready()
        out = {}
        for name, spec in self.store.connectors().items():
            runtime = self.runtimes.get(name)
            state = FAILED if name in self.problems else runtime.state if runtime is not None else \
                spec.target.value if spec.target is TargetState.STOPPED else UNASSIGNED
            out[name] = (state, name not in reasons)
        return out

    def ready(self) -> dict[str, str]:
        """Why each connector that is not ready is not (/ready answers 503 while any is not)."""
        reasons = {}
        for name, spec in self.store.connectors().items():
            if spec.target is TargetState.STOPPED:
                continue
            runtime = self.runtimes.get(name)
            if name in self.problems:
                reasons[name] = self.problems[name]
            elif runtime is None:
                reasons[name] = "starting"
            else:
                ok, why = runtime.ready()
                if not ok:
                    reasons[name] = why
        return reasons

    # -- offsets ------------------------------------------------------------------------------------------
    def _jvm_ready(self) -> None:
        if not self.started:
            raise NotReady("the worker is still starting its JVM, which reading or changing offsets needs")

    async def offsets(self, name: str) -> dict[TopicPartitionKey, int]:
        self._jvm_ready()
        config = self._config_of(name)
        reader = await asyncio.to_thread(TableOffsets, self._spark, config)
        try:
            recorded = await asyncio.to_thread(reader.read)
        finally:
            reader.close()
        return tables_resume(recorded)

    async def change_offsets(self, name: str, changes: OffsetChanges | None) -> None:
        """Alter (or, with None, reset) the offsets: the connector must be STOPPED and its group empty."""
        self._ready_for_writes()
        self._jvm_ready()
        spec = self.spec(name)
        if spec.target is not TargetState.STOPPED or name in self.runtimes:
            raise BadRequest("Connectors must be in the STOPPED state before their offsets can be modified. This "
                             f"can be done for the specified connector by issuing a 'PUT' request to the "
                             f"'/connectors/{name}/stop' endpoint")
        config = self._config_of(name)
        clients = self._kafka.for_connector(config.consumer_overrides, config.producer_overrides)
        try:
            positions = await change_offsets(self._spark, clients, config, changes)
        except OffsetsChangeRefused as exc:
            raise BadRequest(str(exc)) from exc
        log.info("connector offsets changed in its tables and consumer group", connector=name,
                 reset=changes is None, positions={f"{t}[{p}]": o for (t, p), o in sorted(positions.items())})

    def _config_of(self, name: str) -> ConnectorConfig:
        spec = self.spec(name)
        try:
            return self.parse(spec.config)
        except ConfigError as exc:
            raise BadRequest(str(exc)) from exc


TopicPartitionKey = tuple[str, int]

