"""The herder: drives each connector's runtime to what the config store says.

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

import structlog

from tabletopic.config.connector import ConnectorConfig, parse_connector
from tabletopic.config.definition import ConfigError
from tabletopic.config.worker import WorkerConfig
from tabletopic.connectors.config_store import (
    Change,
    ConfigStore,
    RestartRequest,
    TargetState,
    TopicsReset,
)
from tabletopic.connectors.runtime import FAILED, RESTARTING, ConnectorRuntime
from tabletopic.connectors.status_board import StatusBoard, TaskStatus
from tabletopic.kafka.clients import KafkaClients
from tabletopic.write.spark_session import SparkRuntime

log = structlog.get_logger(__name__)


NewRuntime = Callable[[ConnectorConfig, Callable[[ConnectorRuntime], None]], ConnectorRuntime]


class Herder:
    def __init__(self, worker: WorkerConfig, worker_id: str, store: ConfigStore, board: StatusBoard,
                 spark: SparkRuntime, kafka: KafkaClients, new_runtime: NewRuntime,
                 on_fatal: Callable[[int], None]) -> None:
        self.worker = worker
        self.worker_id = worker_id
        self.store = store
        self.board = board
        self.spark = spark
        self.kafka = kafka
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
        self.configs_read = False
        self.closing = False
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
                self.publish(runtime)
            return
        name = change if isinstance(change, str) else change.connector
        if isinstance(change, RestartRequest):
            if change.worker_id not in (None, self.worker_id):
                return
            self._requests.setdefault(name, []).append(change)
        if self.started and not self.closing:
            self._kick(name)

    def _kick(self, name: str) -> None:
        self._dirty.setdefault(name, asyncio.Event()).set()
        driver = self._drivers.get(name)
        if driver is None or driver.done():
            self._drivers[name] = asyncio.get_running_loop().create_task(self._drive(name), name=f"drive-{name}")

    async def _drive(self, name: str) -> None:
        dirty = self._dirty[name]
        while not self.closing:
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
            self.publish(runtime)
            await self._stop(runtime)
            runtime = None
        if runtime is None:
            for warning in config.warnings:  # in standalone and distributed mode alike, whoever wrote it
                log.warning("connector configuration", connector=name, warning=warning)
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
        self.publish(runtime)
        if runtime.state != FAILED or self.closing:
            return
        if self.worker.exit_on_connector_failure:
            self._on_fatal(runtime.exit_code)
        elif self.runtimes.get(runtime.name) is runtime:
            self._kick(runtime.name)  # its driver stops it; it stays FAILED until restarted

    def publish(self, runtime: ConnectorRuntime) -> None:
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
        self.closing = True
        drivers = list(self._drivers.values())
        for driver in drivers:
            driver.cancel()
        await asyncio.gather(*drivers, return_exceptions=True)
        codes = await asyncio.gather(*(self._stop(r, final_commit) for r in list(self.runtimes.values())))
        for name in list(self.runtimes):
            self._unpublish(name)
        return max([0, *codes])

    def parse(self, config: Mapping[str, str]) -> ConnectorConfig:
        return parse_connector(config, self.worker)


