"""One connector running in this process: its sink task, its commit member and its consumer.

Its life follows Kafka Connect's task states: UNASSIGNED while it starts, RUNNING,
PAUSED (its records wait in the consumer; everything read before the pause is
committed), and FAILED with the reason as its trace.  A runtime never restarts itself:
the herder makes a new one.  Whoever starts a runtime stops it; :meth:`stop` is safe to
call at any point of :meth:`start`, and twice.
"""

from __future__ import annotations

import asyncio
import traceback
from collections.abc import Callable
from typing import Any

import structlog
from aiokafka.errors import KafkaError
from prometheus_client import CollectorRegistry

from tabletopic.commit.member import Member
from tabletopic.config.connector import ConnectorConfig
from tabletopic.config.worker import WorkerConfig
from tabletopic.connectors.parts import ConnectorParts, build_parts, build_sink
from tabletopic.consume.agent import FaustConsumer
from tabletopic.core import exit_codes
from tabletopic.kafka.clients import KafkaAccessError, KafkaClients, KafkaUnavailable
from tabletopic.observe.metrics import SinkMetrics
from tabletopic.task.sink_task import SinkTask
from tabletopic.write.iceberg_tables import IcebergTables
from tabletopic.write.java_errors import describe
from tabletopic.write.spark_session import SparkRuntime
from tabletopic.write.table_handle import CATALOG_ERRORS, CatalogUnavailable, TableError

log = structlog.get_logger(__name__)
_LEAVE_GROUP_TIMEOUT_S = 20.0

UNASSIGNED, RUNNING, PAUSED, FAILED, RESTARTING = "UNASSIGNED", "RUNNING", "PAUSED", "FAILED", "RESTARTING"


class StartupError(RuntimeError):
    """The connector cannot start; the message says what to fix."""


class _FinalCommitFailed(RuntimeError):
    pass


class ConnectorRuntime:
    def __init__(self, config: ConnectorConfig, worker: WorkerConfig, kafka: KafkaClients, spark: SparkRuntime,
                 registry: CollectorRegistry, on_change: Callable[[ConnectorRuntime], None] = lambda r: None) -> None:
        self.config = config
        self._worker = worker
        self._kafka = kafka
        self._spark = spark
        self._metrics = SinkMetrics(registry, config.name)
        self._on_change = on_change
        self.log = log.bind(connector=config.name)
        self.state = UNASSIGNED
        self.trace: str | None = None
        self.exit_code = exit_codes.OK  # what a failure asks of the process, when failures stop it
        self.parts: ConnectorParts | None = None
        self._joined = False  # its consumer joined the group: stopping means a final commit and leaving
        self._watcher: asyncio.Task[None] | None = None
        self._stopping: asyncio.Task[int] | None = None
        self.failed = asyncio.Event()

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def task(self) -> SinkTask:
        assert self.parts is not None, "not started"
        return self.parts.task

    @property
    def member(self) -> Member:
        assert self.parts is not None, "not started"
        return self.parts.member

    @property
    def consumer(self) -> FaustConsumer:
        assert self.parts is not None, "not started"
        return self.parts.consumer

    # -- start ------------------------------------------------------------------------------------
    async def start(self, paused: bool = False, probe: bool = True) -> None:
        """Build the connector's parts and join its consumer group; a failure leaves it FAILED.

        ``probe`` first checks that its Kafka clients can log in (the daemon has done that for the
        connectors it starts with).
        """
        lacking = self._spark.require(self.config.catalog.needs_lake_jars, self.config.catalog.driver_jars)
        if lacking:
            self._fail(StartupError(f"this worker's JVM was started without {lacking}, which catalog "
                                    f"{self.config.catalog_name!r} needs: restart the worker (it loads what the "
                                    "connectors it starts with need), or set tabletopic.spark.lake-jars=true in "
                                    "the worker file"), exit_codes.CONFIG, "cannot start")
            return
        try:
            clients = self.config.clients_of(self._kafka)
            if probe:
                for role in ("consumer", "producer"):
                    await clients.probe(role)
            sink = await asyncio.to_thread(build_sink, self.config, self._worker, clients, self._spark,
                                         self._metrics)
            self.parts = build_parts(sink, self.config, self._worker, clients, self._metrics)
            member, consumer = self.parts.member, self.parts.consumer
            await asyncio.to_thread(check_catalog, sink.tables, self.config)
            await sink.task.start()
            await member.start()
            self._joined = True  # from here on, stopping it means committing and leaving the group
            if paused:
                await consumer.hold()
            await consumer.start()
        except KafkaAccessError as exc:
            self._fail(exc, exit_codes.CONFIG, "the Kafka brokers refuse this connector's client settings")
            return
        except (KafkaUnavailable, KafkaError) as exc:
            self._fail(exc, exit_codes.UNAVAILABLE, "cannot reach Kafka; check bootstrap.servers and that the "
                       "brokers are up")
            return
        except TableError as exc:
            self._fail(exc, exit_codes.CONFIG, "cannot start")
            return
        except (StartupError, CatalogUnavailable) as exc:
            self._fail(exc, exit_codes.UNAVAILABLE, "cannot start")
            return
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._fail(exc, exit_codes.FAILED, "cannot start")
            return
        self._set(PAUSED if paused else RUNNING)
        self._watcher = asyncio.get_running_loop().create_task(self._watch(), name=f"watch-{self.name}")
        self.log.info("connector started", group=self.config.group_id, interval_ms=self.config.commit_interval_ms,
                      paused=paused)

    async def _watch(self) -> None:
        """A dead consumer, control reader or round loop fails the connector instead of leaving it silent."""
        assert self.parts is not None
        member = self.parts.member
        waits: list[asyncio.Future[Any]] = [asyncio.ensure_future(self.parts.consumer.failed.wait())]
        if member.error_future is not None:
            waits.append(asyncio.ensure_future(asyncio.shield(member.error_future)))
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
        self._check_failed()

    def _check_failed(self) -> None:
        if self.parts is None:
            return
        member = self.parts.member
        if self.parts.consumer.fatal is not None:
            self._fail(self.parts.consumer.fatal, exit_codes.FAILED, "connector stopped")
        elif member.error_future is not None and member.error_future.done() and not member.error_future.cancelled():
            self._fail(member.error_future.exception() or RuntimeError("the commit protocol ended"),
                       exit_codes.FAILED, "connector's commit protocol failed")

    def _fail(self, exc: BaseException, code: int, what: str) -> None:
        if self.state == FAILED:
            return
        message = describe(exc)
        self.log.error(what, error=message)
        self.trace = "".join(traceback.format_exception_only(type(exc), exc)).strip() \
            if not isinstance(exc, (StartupError, TableError, KafkaAccessError, KafkaUnavailable)) else message
        self.exit_code = code
        self._set(FAILED)
        self.failed.set()

    def _set(self, state: str) -> None:
        self.state = state
        self._on_change(self)

    # -- pause and resume ---------------------------------------------------------------------------
    async def pause(self) -> None:
        """Take no more records, and commit everything taken so far."""
        if self.parts is None or self.state != RUNNING:
            return
        await self.parts.consumer.hold()
        # It takes no more records from here, which is what Connect's PAUSED says: the task shows it at
        # once, beside its connector, while what it took is committed.
        self._set(PAUSED)
        await self.parts.task.writer.wait_for_flushes()
        if not await self.parts.member.flush("pause", self.config.commit_interval_ms / 1000
                                             + self.config.commit_timeout_ms / 1000, closing=False):
            self.log.warning("pausing: what was read is not committed yet; it will be at a later round")

    def resume(self) -> None:
        if self.parts is not None and self.state == PAUSED:
            self.parts.consumer.release()
            self._set(RUNNING)

    # -- stop -----------------------------------------------------------------------------------------
    async def stop(self, timeout_s: float, final_commit: bool = True) -> int:
        """Commit what is buffered, leave the group and stop; the exit code this connector asks for.

        Shielded and idempotent: a second call, or a cancelled caller, never cuts a stop short.
        """
        if self._stopping is None:
            self._stopping = asyncio.ensure_future(self._stop(timeout_s, final_commit))
        return await asyncio.shield(self._stopping)

    async def _stop(self, timeout_s: float, final_commit: bool) -> int:
        if self._watcher is not None:
            self._watcher.cancel()
            await asyncio.gather(self._watcher, return_exceptions=True)
        self._check_failed()  # one the watcher had no time to see
        parts = self.parts
        if parts is None:
            return self.exit_code
        if not self._joined:  # built, or half started: nothing buffered, no group joined
            await parts.member.stop()
            await parts.task.stop()
            parts.sink.close()
            return self.exit_code
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        await parts.consumer.drain(timeout_s / 3)
        try:
            if not final_commit:
                raise _FinalCommitFailed("no final commit was asked for")
            if parts.member.failed:
                raise _FinalCommitFailed("the connector's commit protocol failed")
            if self._spark.jvm_exit() is not None:
                raise _FinalCommitFailed("the Spark driver JVM is gone")
            left = max(0.0, deadline - loop.time())
            await asyncio.wait_for(self._final_round(parts, left * 0.9), left)
        except asyncio.TimeoutError:
            self.log.error("final commit did not finish in task.shutdown.graceful.timeout.ms; "
                           "uncommitted records will be re-read on restart")
            self.exit_code = max(self.exit_code, exit_codes.FAILED)
        except _FinalCommitFailed as exc:
            if final_commit:
                self.log.error("final commit failed; uncommitted records will be re-read on restart", error=str(exc))
                self.exit_code = max(self.exit_code, exit_codes.FAILED)
        try:
            # Leaving the group needs the broker; with it gone, do not outlast the stop timeout.
            await asyncio.wait_for(parts.consumer.stop(), _LEAVE_GROUP_TIMEOUT_S)
        except asyncio.TimeoutError:
            self.log.warning("could not leave the consumer group in time; the broker will expire the member")
        await parts.member.stop()
        await parts.task.stop()
        parts.sink.close()
        return self.exit_code

    async def _final_round(self, parts: ConnectorParts, timeout_s: float) -> None:
        await parts.task.writer.wait_for_flushes()
        if not await parts.member.flush("shutdown", timeout_s):
            raise _FinalCommitFailed(parts.task.last_error or parts.member.coordinator.last_error
                                     or "the coordinator did not commit this member's files in time")

    # -- what the REST API and /ready show ------------------------------------------------------------
    def ready(self) -> tuple[bool, str]:
        if self.state == FAILED:
            return False, f"failed: {self.trace}"
        if self.parts is None or self.state == UNASSIGNED:
            return False, "starting"
        ok, why = self.parts.task.ready()
        if ok:
            ok, why = self.parts.member.health()
        if ok and self.parts.member.coordinator.last_error:
            ok, why = False, f"last commit failed: {self.parts.member.coordinator.last_error}"
        if ok and self.parts.member.maintenance.last_error:
            ok, why = False, f"last maintenance run failed: {self.parts.member.maintenance.last_error}"
        return ok, why

    @property
    def active_topics(self) -> set[str]:
        return set(self.parts.task.active_topics) if self.parts is not None else set()

    def reset_topics(self) -> None:
        if self.parts is not None:
            self.parts.task.active_topics.clear()

    def partitions(self) -> set[tuple[str, int]]:
        return set(self.parts.task.assigned) if self.parts is not None else set()


def check_catalog(tables: IcebergTables, config: ConnectorConfig) -> None:
    """The catalog answers, and the static tables can be opened: before joining the group."""
    try:
        tables.catalog.check()
        for name in config.tables or []:
            tables.exists(name)
    except TableError:
        raise
    except CATALOG_ERRORS as exc:
        why = describe(exc)
        raise StartupError(f"connector {config.name}: the Iceberg catalog {config.catalog_name!r} "
                           f"is not reachable ({why}); check iceberg.catalog.*") from exc
