"""``tabletopic maintain``: the daemon's maintenance, run once, for cron or an operator.

``--dry-run`` plans from metadata read through pyiceberg (no JVM, about a second) and prints
what would be done.  Without it, a SparkSession is started with the connector's catalog and
the same steps run as in the daemon.  It holds no coordinator epoch: it is maintenance by
"someone else", which the sink is built to withstand (see
:mod:`tabletopic.maintain.table_maintenance`), so it may run beside a live daemon.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from tabletopic.config.connector import ConnectorConfig
from tabletopic.config.worker import WorkerConfig
from tabletopic.maintain.plan import plan_maintenance
from tabletopic.maintain.table_maintenance import run_plan
from tabletopic.maintain.table_stats import stats_from_java, stats_from_pyiceberg


def tables_of(config: ConnectorConfig, only: str | None) -> list[str]:
    if only:
        return [only]
    if not config.tables:
        raise ValueError(f"connector {config.name!r} routes to tables dynamically: name them with --table")
    return list(config.tables)


def maintain_once(worker: WorkerConfig, config: ConnectorConfig, only: str | None, dry_run: bool,
                  say: Callable[[str], None] = print) -> int:
    names = tables_of(config, only)
    now_ms = int(time.time() * 1000)
    if dry_run:
        from tabletopic.write.pyiceberg_catalog import open_table
        for name in names:
            stats = stats_from_pyiceberg(open_table(config, name))
            plan = plan_maintenance(stats, config.maintenance_of(name), now_ms, orphans_due=True)
            say(f"table {name}: {stats.describe()}")
            for line in plan.describe():
                say(f"  would {line}" if not line.endswith(("not needed", "none due")) else f"  {line}")
            if plan.remove_orphans:
                say("  (orphan files are found by listing storage, which only a real run does)")
        return 0
    from tabletopic.write.iceberg_tables import IcebergTables, TablesSettings
    from tabletopic.write.spark_session import SparkRuntime
    spark = SparkRuntime(worker.spark_conf, lake=config.catalog.needs_lake_jars,
                         extra_jars=config.catalog.driver_jars)
    try:
        tables = IcebergTables(spark, TablesSettings.of(config))
        for name in names:
            actions = tables.actions(name)
            stats = stats_from_java(actions)
            settings = config.maintenance_of(name)
            plan = plan_maintenance(stats, settings, now_ms, orphans_due=True)
            say(f"table {name}:")
            report = run_plan(actions, name, plan, stats, settings,
                              f"{config.name}@cli")
            for line in report.describe():
                say(f"  {line}")
    finally:
        spark.stop()
    return 0
