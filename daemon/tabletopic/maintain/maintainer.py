"""One connector's table maintenance, run by its coordinator between rounds and under its epoch.

The coordinator starts a run after a round when a table is due (``interval-ms`` since its last look
ended); the member's MaintenanceRuns owns the task: it interrupts it when the coordinator
resigns, and stops and awaits it when the member stops. A table whose maintenance failed is
``last_error`` until its next look succeeds, and /ready shows it. A run looks at one table at a
time on its own thread, so the round loop never waits for it. Its Spark jobs go to their own
fair-scheduler pool and job group: the sink's writes share the cores with them task by task
instead of queueing behind a whole rewrite, and a shutdown cancels the job under way (partial
progress keeps the groups already committed; the rest is redone at the next run).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import structlog

from tabletopic.config.maintenance_settings import MaintenanceSettings
from tabletopic.maintain.commit_positions import CommitPositions
from tabletopic.maintain.plan import plan_conversion, plan_maintenance
from tabletopic.maintain.table_maintenance import MaintenanceReport, MaintenanceStopped, run_plan
from tabletopic.maintain.table_stats import TableStats, stats_from_java
from tabletopic.observe.metrics import SinkMetrics
from tabletopic.write.iceberg_tables import IcebergTables
from tabletopic.write.java_errors import describe

log = structlog.get_logger(__name__)
POOL = "tabletopic-maintenance"


class MaintenanceFailed(RuntimeError):
    """A run failed; the message says why in one line (a Java exception's classes and messages, cause by
    cause, where py4j's own says only which call failed)."""


class Maintainer:
    """Looks at each table and runs the maintenance its plan asks for, one table at a time on a thread
    of its own; the coordinator starts a look between rounds and waits for none."""

    def __init__(self, connector: str, group_id: str, tables: IcebergTables, settings: MaintenanceSettings,
                 metrics: SinkMetrics, names: Callable[[], Iterable[str]],
                 enabled: Callable[[str], bool] = lambda table: True,
                 clock: Callable[[], float] = time.monotonic,
                 table_settings: Callable[[str], MaintenanceSettings] | None = None) -> None:
        """``settings`` are the connector's; ``table_settings`` gives a table's own, where they differ
        (a table another engine compacts)."""
        self._connector = connector
        self._group_id = group_id
        self._tables = tables
        self._settings = settings
        self._table_settings = table_settings or (lambda table: settings)
        self._told_foreign: set[str] = set()  # tables whose foreign rewrites were logged
        self._metrics = metrics
        self._names = names
        self._enabled = enabled
        self._clock = clock
        self._log = log.bind(connector=connector)
        self._job_group = f"tabletopic-maintenance-{connector}"
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"maintain-{connector}")
        self._last_look: dict[str, float] = {}
        self._last_orphans: dict[str, float] = {}
        # The committer asks it around each commit.
        self.commit_positions = CommitPositions(self._table_settings, enabled)
        self._stopping = False
        self.last_error: str | None = None

    @property
    def max_file_wait_s(self) -> float:
        return self._settings.max_file_wait_s

    def due(self) -> list[str]:
        now = self._clock()
        names = {n for n in self._names() if self._enabled(n)}
        for name in names:
            # First looked at one interval after it is first seen, not at once: a coordinator that
            # just took over (a rebalance, a restart) has catching up to do first.
            self._last_look.setdefault(name, now)
        # Between looks, every round converts the equality deletes it finds (see plan_conversion).
        return sorted(n for n in names if self._table_settings(n).converts_every_round or self.look_due(n, now))

    def look_due(self, name: str, now: float) -> bool:
        """Whether ``name`` gets a whole look (every step whose trigger is met), not only a conversion."""
        return now - self._last_look.setdefault(name, now) >= self._settings.interval_s

    async def run(self, names: list[str], epoch: int, keep_going: Callable[[], bool]) -> None:
        """Look at ``names`` one by one, acting where a trigger is met; failures are logged and counted
        and the table is looked at again after the interval."""
        loop = asyncio.get_running_loop()
        for name in names:
            if self._stopping or not keep_going():
                return
            now = self._clock()
            look = self.look_due(name, now)
            if look:
                self._last_look[name] = now
            try:
                report = await loop.run_in_executor(self._executor, self._maintain, name, epoch, look,
                                                    lambda: keep_going() and not self._stopping)
            except MaintenanceStopped as exc:
                self._log.info("maintenance stopped", table=name, reason=str(exc))
                return
            except Exception as exc:  # the catalog, storage or Spark: counted, told, retried next look
                self.last_error = f"{name}: {exc}"
                self._metrics.maintenance_failures.labels(table=name).inc()
                self._log.error("maintenance failed; it is tried again at the next look", table=name,
                                error=str(exc)[:1000])
                continue
            finally:
                if look:
                    # The interval runs from a look's end: another engine's rewrite started when a look
                    # ends has the whole interval before our next conversion could fail it, however long
                    # the look took.
                    self._last_look[name] = self._clock()
            if report is not None:
                self.last_error = None
                self._log.info("maintained", table=name, epoch=epoch, steps=report.steps,
                               equality_deletes_converted=report.equality_deletes_converted,
                               conversion_refused=report.conversion_refused,
                               rewritten_files=report.rewritten_files, added_files=report.added_files,
                               delete_files_folded=report.deletes_removed,
                               rewritten_bytes=report.rewritten_bytes, snapshots_expired=report.snapshots_expired,
                               orphans_removed=report.orphans_removed, seconds=round(report.seconds, 2))

    def _maintain(self, name: str, epoch: int, look: bool,
                  keep_going: Callable[[], bool]) -> MaintenanceReport | None:
        """A look (every step whose trigger is met) when ``look``, else only the conversion."""
        self.commit_positions.maintenance_starts(name)
        try:
            return self._maintain_now(name, epoch, look, keep_going)
        except MaintenanceStopped:
            raise
        except Exception as exc:  # told here, off the loop: a Java exception's causes are read from the JVM
            raise MaintenanceFailed(describe(exc)) from exc
        finally:
            self.commit_positions.maintenance_ends(name)

    def _maintain_now(self, name: str, epoch: int, look: bool,
                      keep_going: Callable[[], bool]) -> MaintenanceReport | None:
        self._tables.spark.join_job_group(self._job_group, f"maintenance of {name}", POOL)
        recorded = self._tables.recorded(name, self._group_id)  # refreshes the table first
        if recorded.epoch > epoch:
            raise MaintenanceStopped(f"table {name} was committed by coordinator epoch {recorded.epoch}, "
                                     f"newer than {epoch}")
        actions = self._tables.actions(name)
        stats = stats_from_java(actions)
        self._observe(name, stats)
        settings = self._table_settings(name)
        self._tell_foreign_rewrites(name, stats, settings)
        now = self._clock()
        # Listing storage is the costliest step: first after one orphan interval, then once per interval.
        orphans_due = now - self._last_orphans.setdefault(name, now) >= settings.orphan_interval_s
        plan = (plan_maintenance(stats, settings, int(time.time() * 1000), orphans_due) if look
                else plan_conversion(stats, settings))
        if plan.empty:
            return None
        self._log.info("maintenance starting", table=name, epoch=epoch, plan=plan.describe())
        started = time.monotonic()

        def starting(step: str) -> None:
            self._log.info("maintenance step", table=name, step=step)
            if step == "compact":
                self.commit_positions.compaction_starts(name)
            else:
                self.commit_positions.compaction_ends(name)

        try:
            report = run_plan(actions, name, plan, stats, settings,
                              f"{self._connector}@{epoch}", keep_going, starting)
        finally:
            self.commit_positions.compaction_ends(name)
        if plan.remove_orphans:
            self._last_orphans[name] = now
        labels = {"table": name}
        for step in report.steps:
            self._metrics.maintenance_runs.labels(step=step, **labels).inc()
        self._metrics.maintenance_seconds.labels(**labels).observe(time.monotonic() - started)
        self._metrics.maintenance_rewritten_bytes.labels(**labels).inc(report.rewritten_bytes)
        self._metrics.equality_deletes_converted.labels(**labels).inc(report.equality_deletes_converted)
        if report.conversion_refused:
            self._metrics.conversions_refused.labels(**labels).inc()
        self._metrics.last_maintenance.labels(**labels).set(time.time())
        if report.after is not None:
            self._observe(name, report.after)
        return report

    def _tell_foreign_rewrites(self, name: str, stats: TableStats, settings: MaintenanceSettings) -> None:
        """Once per table: another engine rewrites its files. Its rewrites fail whenever a commit puts
        position deletes on a file they replace, which the connector's commits do unless told."""
        if name in self._told_foreign:
            return
        foreign = [s.snapshot_id for s in stats.snapshots if s.foreign_rewrite]
        if not foreign:
            return
        self._told_foreign.add(name)
        if settings.compaction:
            self._log.warning(
                "another engine rewrites this table's data files; its rewrites fail whenever a commit or a "
                "conversion puts position deletes on a file they replace, and this connector's do: set "
                f"iceberg.table.{name}.external-compaction=true (see docs/tables.md)", table=name,
                snapshot_id=foreign[-1])
        else:
            self._log.info("another engine compacts this table, as external-compaction says", table=name,
                           snapshot_id=foreign[-1])

    def _observe(self, name: str, stats: Any) -> None:
        labels = {"table": name}
        self._metrics.table_data_files.labels(**labels).set(stats.data_files)
        self._metrics.table_delete_files.labels(**labels).set(stats.delete_files)
        self._metrics.table_snapshots.labels(**labels).set(len(stats.snapshots))
        self._metrics.table_bytes.labels(**labels).set(stats.total_bytes)

    def interrupt(self) -> None:
        """Stop at the next step, and cancel the Spark job under way."""
        self._stopping = True
        with contextlib.suppress(Exception):  # a JVM already gone has nothing to cancel
            self._tables.spark.cancel_job_group(self._job_group)

    def resume(self) -> None:
        self._stopping = False

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
