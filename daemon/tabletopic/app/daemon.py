"""The worker process: its HTTP listener, Spark, the built-in registry, and the herder of its connectors.

Standalone and distributed mode run the same process; they differ only in where the
connectors' configurations live (a :class:`~tabletopic.connectors.config_store.ConfigStore`)
and in whom else the status board shows.  Everything is built from the configuration
objects and owned by the :class:`Daemon`, so two can run in one process (tests do).

Start-up is a sequence of named steps, each logged as it starts and ends and shown by
``/ready`` meanwhile; the HTTP listener is up before the first.  A stop asked for at any
point (SIGTERM) starts nothing more.  Shutdown is graceful: every connector commits what
it buffered in a last round and leaves its group; the process exits 0.  The driver
JVM's life is the daemon's: if it dies, the daemon stops (exit 1) without a final commit.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import signal
import socket
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar
from urllib.parse import urlparse

import structlog

from tabletopic.config.connector import ConnectorConfig
from tabletopic.config.definition import ConfigError
from tabletopic.config.worker import WorkerConfig
from tabletopic.connectors.config_store import ConfigStore, TargetState
from tabletopic.connectors.herder import Herder
from tabletopic.connectors.requests import ConnectorRequests
from tabletopic.connectors.runtime import ConnectorRuntime
from tabletopic.connectors.status_board import LocalStatusBoard, StatusBoard
from tabletopic.core import exit_codes, scratch_files
from tabletopic.kafka.clients import KafkaAccessError, KafkaClients, KafkaUnavailable
from tabletopic.observe.metrics import connector_states, new_registry
from tabletopic.registry.service import RegistryStartError, SchemaRegistryService
from tabletopic.rest.connect_api import ConnectApi
from tabletopic.rest.http_server import HttpServer
from tabletopic.write.jvm_classpath import JavaNotFoundError, build_classpath
from tabletopic.write.jvm_liveness import JvmLiveness
from tabletopic.write.spark_session import SparkRuntime

log = structlog.get_logger(__name__)
_JVM_CHECK_S = 1.0
T = TypeVar("T")


class _Stopped(Exception):
    """A stop was asked for while a start-up step ran."""


class _StartFailed(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class Daemon:
    def __init__(self, worker: WorkerConfig, store: ConfigStore, spark: SparkRuntime | None = None,
                 board: Callable[[str], StatusBoard] | None = None, mode: str = "standalone") -> None:
        self.worker = worker
        self.store = store
        self.mode = mode
        self.spark = spark or SparkRuntime(worker.spark_conf, lake=worker.lake_jars, class_archive=worker.class_archive)
        self._owns_spark = spark is None
        self.jvm_liveness = JvmLiveness(self.spark)
        self.kafka = KafkaClients(worker.bootstrap_servers, worker.raw)
        self.registry = new_registry(self.spark.heap_bytes)
        self._board_factory = board or (lambda worker_id: LocalStatusBoard())
        self.worker_id = _advertised(worker, None)
        self.herder = Herder(worker, self.worker_id, store, LocalStatusBoard(), self.spark, self.kafka,
                             self._new_runtime, self._on_fatal)
        self.kafka_cluster_id: str | None = None  # as the brokers report it, read at start-up
        self.requests = ConnectorRequests(self.herder)
        self.api = ConnectApi(self.requests, lambda: self.kafka_cluster_id)
        self.registry.register(connector_states(self.requests.connector_states))
        self.http: HttpServer | None = None
        self.schema_registry: SchemaRegistryService | None = None
        if worker.registry_listeners:
            self.schema_registry = SchemaRegistryService(worker.registry_listeners[0], self.kafka,
                                                         worker.registry_topic, worker.registry_compatibility,
                                                         worker.registry_security)
        self.phase = "starting"
        self.stop_requested = asyncio.Event()
        self._fatal: asyncio.Future[int] | None = None
        self._jvm_reported = False

    # -- start-up ---------------------------------------------------------------------------------------
    async def run(self) -> int:
        """Run until a stop is asked for, a connector fails (with exit-on-failure) or the JVM dies."""
        self._fatal = asyncio.get_running_loop().create_future()
        try:
            await self._start()
        except _Stopped:
            log.info("stopping during start-up", phase=self.phase)
            return await self.shutdown()
        except _StartFailed as exc:
            return await self.shutdown(exit_code=exc.code)
        self.phase = "running"
        stop = asyncio.ensure_future(self.stop_requested.wait())
        watcher = asyncio.ensure_future(self._watch_jvm())
        assert self._fatal is not None
        waited: list[asyncio.Future[Any]] = [stop, watcher, self._fatal]
        done, _ = await asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED)
        for future in (stop, watcher):
            future.cancel()
        await asyncio.gather(stop, watcher, return_exceptions=True)
        if await self._jvm_gone(grace_s=0.0 if stop in done else 3.0):
            # Whatever noticed first (a write, a commit, the watcher), a dead JVM is the cause to report.
            return await self.shutdown(exit_code=exit_codes.FAILED, final_commit=False)
        code = self._fatal.result() if self._fatal in done else exit_codes.OK
        return await self.shutdown(exit_code=code)

    async def _start(self) -> None:
        swept = await asyncio.to_thread(scratch_files.sweep_dead)
        if swept:
            log.info("removed scratch files that killed processes left behind", files=len(swept))
        if self.worker.listeners:
            self.http = HttpServer(self.worker.listeners[0], self.registry, self.worker.rest_security, self._alive,
                                   self._ready, self.api.add_routes)
            await self.http.start()
            self.worker_id = _advertised(self.worker, self.http)
            log.info("listening", url=f"{self.http.scheme}://{self.http.host}:{self.http.port}",
                     worker_id=self.worker_id)
        self.herder.worker_id = self.worker_id
        self.herder.board = self._board_factory(self.worker_id)
        # Before Kafka: a missing JDK is a configuration to fix (78), not an outage to wait out.
        await self._step("building the JVM classpath (jar cache)", asyncio.to_thread(self._classpath, False))
        await self._step("checking Kafka", self._check_kafka_worker())
        if self.schema_registry is not None:
            await self._step("starting the Schema Registry", asyncio.to_thread(self._start_registry))
        await self._step("reading connector configurations", self.store.start())
        self.herder.configs_read = True
        await self._step("reading the workers' statuses", self.herder.board.start())
        initial = self._initial_configs()
        await self._step("checking the connectors' Kafka access", self._check_kafka_connectors(initial))
        for config in initial:
            self.spark.require(config.catalog.needs_lake_jars, config.catalog.driver_jars)
        if self.spark.lake:
            await self._step("fetching the S3, REST and Glue jars", asyncio.to_thread(self._classpath, True))
        await self._step("starting Spark", asyncio.to_thread(lambda: self.spark.session))
        self.herder.probed = {c.name for c in initial}
        await self.herder.start()
        await self._step("starting connectors", self.herder.wait_started())

    def _new_runtime(self, config: ConnectorConfig, on_change: Callable[[ConnectorRuntime], None]) -> ConnectorRuntime:
        return ConnectorRuntime(config, self.worker, self.kafka, self.spark, self.registry, on_change)

    async def _step(self, phase: str, work: Awaitable[T]) -> T:
        """One start-up step: logged, shown by /ready, and abandoned if a stop is asked for."""
        if self.stop_requested.is_set():
            if inspect.iscoroutine(work):
                work.close()  # never started: closed, so that it is not reported as never awaited
            raise _Stopped()
        self.phase = phase
        started = time.monotonic()
        log.info("start-up step", step=phase)
        job = asyncio.ensure_future(work)
        stop = asyncio.ensure_future(self.stop_requested.wait())
        try:
            await asyncio.wait([job, stop], return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        if not job.done():
            # Joining a group can take a rebalance timeout and Spark a while to start: a signal must not
            # wait for either. A thread's work runs on, but nothing more is started after it.
            job.cancel()
            await asyncio.gather(job, return_exceptions=True)
            raise _Stopped()
        result = job.result()
        log.info("start-up step done", step=phase, seconds=round(time.monotonic() - started, 2))
        return result

    def _classpath(self, lake: bool) -> None:
        try:
            build_classpath(lake=lake)
        except JavaNotFoundError as exc:
            log.error("cannot start", error=str(exc))
            raise _StartFailed(exit_codes.CONFIG) from exc

    def _start_registry(self) -> None:
        assert self.schema_registry is not None
        try:
            self.schema_registry.start()
        except RegistryStartError as exc:
            log.error("cannot start", error=f"{exc}; check bootstrap.servers and schema.registry.listeners")
            raise _StartFailed(exit_codes.UNAVAILABLE) from exc

    def _initial_configs(self) -> list[ConnectorConfig]:
        """The connectors to run from the start, parsed; one that does not parse fails on its own later."""
        out = []
        for spec in self.store.connectors().values():
            if spec.target is TargetState.STOPPED:
                continue
            try:
                out.append(self.herder.parse(spec.config))
            except ConfigError:
                continue
        return out

    async def _check_kafka_worker(self) -> None:
        ids = await self._probe({self.kafka.describe(): (self.kafka, "admin")})
        self.kafka_cluster_id = next((i for i in ids if i), None)

    async def _check_kafka_connectors(self, configs: list[ConnectorConfig]) -> None:
        """Before anything slow starts: can every client log in? Exits 78 if the brokers refuse one."""
        checks: dict[str, tuple[KafkaClients, str]] = {}
        for config in configs:
            clients = config.clients_of(self.kafka)
            for role in ("consumer", "producer"):
                checks.setdefault(clients.describe(role), (clients, role))
        await self._probe(checks)

    async def _probe(self, checks: dict[str, tuple[KafkaClients, str]]) -> list[str | None]:
        """Each client's probe (see KafkaClients.probe): the cluster ids they were told."""
        ids = []
        for where, (clients, role) in checks.items():
            try:
                ids.append(await clients.probe(role))
            except KafkaAccessError as exc:
                log.error("the Kafka brokers refuse this configuration; fix it, a restart will not help",
                          error=str(exc))
                raise _StartFailed(exit_codes.CONFIG) from exc
            except KafkaUnavailable as exc:
                log.error("cannot reach Kafka; check bootstrap.servers and that the brokers are up", kafka=where,
                          bootstrap_servers=",".join(self.worker.bootstrap_servers), error=str(exc))
                raise _StartFailed(exit_codes.UNAVAILABLE) from exc
        return ids

    # -- running ----------------------------------------------------------------------------------------
    def _on_fatal(self, code: int) -> None:
        if self._fatal is not None and not self._fatal.done():
            self._fatal.set_result(code)

    async def _alive(self) -> tuple[bool, dict[str, Any]]:
        why = await self.jvm_liveness.check()
        if why is not None:
            return False, {"status": "down", "reason": why}
        return True, {"status": "ok"}

    def _ready(self) -> tuple[bool, dict[str, Any]]:
        if self.phase != "running":
            return False, {"status": "starting", "phase": self.phase}
        reasons = self.requests.ready()
        if reasons:
            return False, {"status": "not ready", "reasons": reasons}
        return True, {"status": "ready"}

    async def _watch_jvm(self) -> None:
        """The JVM's life is the daemon's: if it dies, stop, so the service manager starts both anew."""
        while self.spark.jvm_exit() is None:
            await asyncio.sleep(_JVM_CHECK_S)

    async def _jvm_gone(self, grace_s: float) -> bool:
        """Whether the driver JVM is gone, said once. A py4j call that failed may have noticed a moment
        before the process could be reaped: ``grace_s`` lets its exit code show."""
        deadline = time.monotonic() + grace_s
        while (code := self.spark.jvm_exit()) is None and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        if code is None:
            return False
        if not self._jvm_reported:
            self._jvm_reported = True
            log.error("the Spark driver JVM died; stopping without a final commit: what was not committed is read "
                      "again on restart", jvm_pid=self.spark.jvm_pid(), jvm_exit_code=code)
        return True

    # -- shutdown ---------------------------------------------------------------------------------------
    async def shutdown(self, exit_code: int = exit_codes.OK, final_commit: bool = True) -> int:
        """Stop every connector together, so the whole fits the stop timeout however many there are."""
        self.phase = "stopping"
        codes = [exit_code, await self.herder.stop(final_commit=final_commit)]
        await self.herder.board.stop()
        await self.store.stop()
        if self.http is not None:
            await self.http.stop()
        self.jvm_liveness.close()
        if self.schema_registry is not None:
            await asyncio.to_thread(self.schema_registry.stop)
        if self._owns_spark and self.spark.jvm_exit() is None:
            await asyncio.to_thread(self.spark.stop)
        code = max(codes)
        log.info("stopped", exit_code=code)
        return code

    def install_signal_handlers(self, pending: Sequence[signal.Signals] = ()) -> None:
        """SIGTERM and SIGINT stop the daemon; ``pending`` came before these handlers were in, and stop it now."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._on_signal, sig)
        for sig in pending[:1]:
            self._on_signal(sig)

    def _on_signal(self, sig: signal.Signals) -> None:
        if self.stop_requested.is_set():
            # The operator insists: leave now. Nothing is lost: what was not committed is read again.
            log.warning("second signal: exiting at once without a final commit", signal=sig.name)
            os._exit(exit_codes.FAILED)
        log.info("stopping on signal; committing what is buffered (a second signal exits at once)", signal=sig.name)
        self.stop_requested.set()


def _advertised(worker: WorkerConfig, http: HttpServer | None) -> str:
    """The worker's id, as Connect's: the host and port its REST API is reached at."""
    host = worker.advertised_host
    port = worker.advertised_port
    if http is not None:
        host = host or (http.host if http.host not in ("0.0.0.0", "::", "") else socket.gethostname())
        port = port or http.port
    elif worker.listeners:
        parsed = urlparse(worker.listeners[0])
        host, port = host or parsed.hostname, port or parsed.port
    return f"{host or socket.gethostname()}:{port or os.getpid()}"
