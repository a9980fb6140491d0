"""A standalone worker: one process, its connectors, one SparkSession, one HTTP listener.

Everything is built from the configuration objects and owned by the
:class:`Standalone` instance, so two can run in one process (tests do).
Shutdown is graceful: consumption stops, one last barrier commits what is
buffered, the consumer leaves its group and the process exits 0.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import structlog
from aiokafka.errors import KafkaError

from tabletopic import exit_codes
from tabletopic.commit.channel import Channel
from tabletopic.commit.member import Member
from tabletopic.config.connector import ConnectorConfig
from tabletopic.config.secrets import redact
from tabletopic.config.worker import WorkerConfig
from tabletopic.consume.agent import FaustConsumer
from tabletopic.kafka_clients import KafkaAccessError, KafkaClients, KafkaUnavailable
from tabletopic.ops.http_server import ConnectorView, HttpServer
from tabletopic.ops.metrics import SinkMetrics, new_registry
from tabletopic.registry.service import RegistryStartError, SchemaRegistryService
from tabletopic.sink_task import SinkTask
from tabletopic.write.iceberg_tables import JAVA_ERRORS, CatalogUnavailable, TableError, java_error_message
from tabletopic.write.spark_session import SparkRuntime

log = structlog.get_logger(__name__)
_LEAVE_GROUP_TIMEOUT_S = 20.0
_JVM_CHECK_S = 1.0


@dataclass
class _Connector:
    config: ConnectorConfig
    task: SinkTask
    consumer: FaustConsumer
    member: Member
    started: bool = False  # its consumer joined the group: shutdown has something to commit and leave

    def ready(self) -> tuple[bool, str]:
        ok, why = self.task.ready()
        if ok:
            ok, why = self.member.health()
        if ok and self.member.coordinator.last_error:
            ok, why = False, f"last commit failed: {self.member.coordinator.last_error}"
        return ok, why


class _FinalCommitFailed(RuntimeError):
    pass


class StartupError(RuntimeError):
    """The worker cannot start; the message says what to fix."""


class Standalone:
    def __init__(self, worker: WorkerConfig, connectors: list[ConnectorConfig],
                 spark: SparkRuntime | None = None) -> None:
        self.worker = worker
        self.spark = spark or SparkRuntime(
            worker.spark_conf, lake=any(c.catalog.needs_lake_jars for c in connectors),
            extra_jars=sorted({jar for c in connectors for jar in c.catalog.driver_jars}))
        self._owns_spark = spark is None
        self.registry = new_registry(lambda: self.spark.jvm if self.spark._session is not None else None)
        self.connectors: list[_Connector] = []
        self._configs = connectors
        self.http: HttpServer | None = None
        self.schema_registry: SchemaRegistryService | None = None
        self.kafka = KafkaClients(worker.bootstrap_servers, worker.raw)
        if worker.registry_listeners:
            self.schema_registry = SchemaRegistryService(worker.registry_listeners[0], self.kafka,
                                                         worker.registry_topic, worker.registry_compatibility,
                                                         worker.registry_security)
        self.stop_requested = asyncio.Event()
        self._stopping = asyncio.Event()
        self._jvm_lost: asyncio.Future[int] | None = None
        self._jvm_reported = False

    async def _build(self) -> None:
        if self.schema_registry is not None:
            try:
                await asyncio.to_thread(self.schema_registry.start)
            except RegistryStartError as exc:
                raise StartupError(f"{exc}; check bootstrap.servers and schema.registry.listeners") from exc
        await asyncio.to_thread(lambda: self.spark.session)
        for config in self._configs:
            if self.stop_requested.is_set():
                return  # a signal during start-up: start nothing more
            metrics = SinkMetrics(self.registry, config.name)
            clients = self.kafka.for_connector(config.consumer_overrides, config.producer_overrides)
            task = await asyncio.to_thread(SinkTask, config, clients, self.spark, metrics)
            await asyncio.to_thread(_check_catalog, task)
            channel = Channel(clients, config.control_topic, config.name,
                              on_skipped=metrics.control_messages_skipped.inc)
            member = Member(config.name, channel, task, task.table_commits, metrics, config.commit_interval_ms / 1000,
                            config.commit_timeout_ms / 1000, config.commit_stall_intervals,
                            maintenance=task.maintainer)
            consumer = FaustConsumer(config, self.worker, clients, task, member)
            self.connectors.append(_Connector(config, task, consumer, member))

    async def run(self) -> int:
        """Run until stop_requested is set or a connector fails; return the exit code."""
        code = await self._check_kafka()
        if code is not None or self.stop_requested.is_set():
            return code or exit_codes.OK
        try:
            await self._build()
        except (TableError, StartupError, CatalogUnavailable) as exc:
            log.error("cannot start", error=str(exc))
            if self.schema_registry is not None:
                await asyncio.to_thread(self.schema_registry.stop)
            return exit_codes.CONFIG if isinstance(exc, TableError) else exit_codes.UNAVAILABLE
        if self.worker.listeners:
            self.http = HttpServer(self.worker.listeners[0], self.registry, [
                ConnectorView(c.config.name, redact(c.config.written), _status(c), c.ready) for c in self.connectors],
                self.worker.rest_security, self._alive)
            await self.http.start()
            log.info("listening", url=f"{self.worker.rest_security.scheme}://{self.http.host}:{self.http.port}")
        for c in self.connectors:
            if self.stop_requested.is_set():
                log.info("stopping during start-up", connector=c.config.name)
                return await self.shutdown()
            try:
                await c.task.start()
                await c.member.start()
                c.started = True  # from here on, stopping it means leaving the group
                if not await self._until_stopped(c.consumer.start()):
                    # Joining the group can take a rebalance timeout (another member slow to
                    # rejoin): a signal must not wait for it.
                    log.info("stopping during start-up", connector=c.config.name)
                    return await self.shutdown()
            except KafkaError as exc:
                log.error("cannot reach Kafka; check bootstrap.servers and that the brokers are up",
                          connector=c.config.name, bootstrap_servers=",".join(self.worker.bootstrap_servers),
                          error=str(exc))
                await self.shutdown(exit_code=exit_codes.UNAVAILABLE)
                return exit_codes.UNAVAILABLE
            log.info("connector started", connector=c.config.name, group=c.config.group_id,
                     interval_ms=c.config.commit_interval_ms)
        # Every connector's background work is watched: a dead consumer, control reader or round loop
        # stops the daemon instead of leaving it up and silent.
        failed = [asyncio.ensure_future(c.consumer.failed.wait()) for c in self.connectors]
        members = {c.member.error_future: c for c in self.connectors if c.member.error_future is not None}
        stop = asyncio.ensure_future(self.stop_requested.wait())
        self._jvm_lost = asyncio.get_running_loop().create_future()
        watcher = asyncio.ensure_future(self._watch_jvm())
        done, _ = await asyncio.wait([stop, *failed, *members, self._jvm_lost], return_when=asyncio.FIRST_COMPLETED)
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
        if await self._jvm_gone(grace_s=0.0 if stop in done else 3.0):
            # Whatever noticed first (a write, a commit, the watcher), a dead JVM is the cause to report.
            return await self.shutdown(exit_code=exit_codes.FAILED)
        code = 0
        for future in done:
            if future in members and not future.cancelled() and future.exception() is not None:
                log.error("connector's commit protocol failed; stopping", connector=members[future].config.name,
                          error=repr(future.exception()))
                code = 1
        for f in [stop, *failed]:
            f.cancel()
        return await self.shutdown(exit_code=code)

    async def _until_stopped(self, work: Awaitable[None]) -> bool:
        """Await ``work`` unless a stop is requested first (then cancel it); True if it finished."""
        job = asyncio.ensure_future(work)
        stop = asyncio.ensure_future(self.stop_requested.wait())
        try:
            await asyncio.wait([job, stop], return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        if job.done():
            job.result()  # its error, if any
            return True
        job.cancel()
        await asyncio.gather(job, return_exceptions=True)
        return False

    async def _check_kafka(self) -> int | None:
        """Before anything slow starts: can every client log in? None if so, else the exit code."""
        checks = {self.kafka.describe(): (self.kafka, "admin")}
        for config in self._configs:
            clients = self.kafka.for_connector(config.consumer_overrides, config.producer_overrides)
            for role in ("consumer", "producer"):
                checks.setdefault(clients.describe(role), (clients, role))
        for where, (clients, role) in checks.items():
            try:
                await clients.probe(role)
            except KafkaAccessError as exc:
                log.error("the Kafka brokers refuse this configuration; fix it, a restart will not help",
                          error=str(exc))
                return exit_codes.CONFIG
            except KafkaUnavailable as exc:
                log.error("cannot reach Kafka; check bootstrap.servers and that the brokers are up", kafka=where,
                          error=str(exc))
                return exit_codes.UNAVAILABLE
        return None

    async def shutdown(self, exit_code: int = 0) -> int:
        """Stop every connector together, so the whole fits the stop timeout however many there are."""
        self._stopping.set()
        codes = await asyncio.gather(*(self._stop_connector(c) for c in self.connectors))
        if self.http is not None:
            await self.http.stop()
        if self.schema_registry is not None:
            await asyncio.to_thread(self.schema_registry.stop)
        if self._owns_spark and self.spark.jvm_exit() is None:
            await asyncio.to_thread(self.spark.stop)
        code = max([exit_code, *codes])
        log.info("stopped", exit_code=code)
        return code

    async def _stop_connector(self, c: _Connector) -> int:
        """Commit what is buffered, leave the group, stop; the exit code this connector asks for."""
        if not c.started:  # built, or half started, during start-up: nothing buffered, no group joined
            await c.member.stop()
            await c.task.stop()
            return exit_codes.OK
        code = exit_codes.OK
        timeout = self.worker.shutdown_timeout_ms / 1000
        await c.consumer.drain()
        try:
            if c.member.failed:
                raise _FinalCommitFailed("the connector's commit protocol failed")
            if self.spark.jvm_exit() is not None:
                raise _FinalCommitFailed("the Spark driver JVM is gone")
            await asyncio.wait_for(self._final_barrier(c, timeout * 0.9), timeout)
        except asyncio.TimeoutError:
            log.error("final commit did not finish in task.shutdown.graceful.timeout.ms; "
                      "uncommitted records will be re-read on restart", connector=c.config.name)
            code = exit_codes.FAILED
        except _FinalCommitFailed as exc:
            log.error("final commit failed; uncommitted records will be re-read on restart",
                      connector=c.config.name, error=str(exc))
            code = exit_codes.FAILED
        if c.consumer.fatal is not None:
            log.error("connector stopped", connector=c.config.name, error=str(c.consumer.fatal))
            code = exit_codes.FAILED
        try:
            # Leaving the group needs the broker; with it gone, do not outlast the stop timeout.
            await asyncio.wait_for(c.consumer.stop(), _LEAVE_GROUP_TIMEOUT_S)
        except asyncio.TimeoutError:
            log.warning("could not leave the consumer group in time; the broker will expire the member",
                        connector=c.config.name)
        await c.member.stop()
        await c.task.stop()
        return code

    def _alive(self) -> tuple[bool, str]:
        code = self.spark.jvm_exit()
        if code is not None:
            return False, f"the Spark driver JVM exited with code {code}"
        return True, "ok"

    async def _watch_jvm(self) -> None:
        """The JVM's life is the daemon's: if it dies, stop, so the service manager starts both anew."""
        while self.spark.jvm_exit() is None:
            await asyncio.sleep(_JVM_CHECK_S)
        if self._jvm_lost is not None and not self._jvm_lost.done():
            self._jvm_lost.set_result(self.spark.jvm_exit() or 0)

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

    async def _final_barrier(self, c: _Connector, timeout_s: float) -> None:
        await c.task.writer.wait_for_flushes()
        if not await c.member.flush("shutdown", timeout_s):
            raise _FinalCommitFailed(c.task.last_error or c.member.coordinator.last_error
                                     or "the coordinator did not commit this member's files in time")

    def install_signal_handlers(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._on_signal, sig)

    def _on_signal(self, sig: signal.Signals) -> None:
        if self.stop_requested.is_set():
            # The operator insists: leave now. Nothing is lost: what was not committed is read again.
            log.warning("second signal: exiting at once without a final commit", signal=sig.name)
            os._exit(exit_codes.FAILED)
        log.info("stopping on signal; committing what is buffered (a second signal exits at once)", signal=sig.name)
        self.stop_requested.set()


def _check_catalog(task: SinkTask) -> None:
    try:
        task.tables.jvm_catalog()
        for name in task.config.tables or []:
            task.tables.exists(name)
    except TableError:
        raise
    except (*JAVA_ERRORS, CatalogUnavailable) as exc:
        why = str(exc) if isinstance(exc, CatalogUnavailable) else java_error_message(exc)
        raise StartupError(f"connector {task.config.name}: the Iceberg catalog {task.config.catalog_name!r} "
                           f"is not reachable ({why}); check iceberg.catalog.*") from exc


def _status(c: _Connector) -> Callable[[], dict[str, object]]:
    def status() -> dict[str, object]:
        state = "FAILED" if c.consumer.fatal is not None else "RUNNING"
        task = {"id": 0, "state": state, "worker_id": "tabletopic"}
        if c.consumer.fatal is not None:
            task["trace"] = str(c.consumer.fatal)
        return {"name": c.config.name, "connector": {"state": state, "worker_id": "tabletopic"},
                "tasks": [task], "type": "sink"}
    return status
