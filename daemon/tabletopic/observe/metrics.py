"""Prometheus metrics, one registry per daemon (no global state, so tests can run two).

Names follow prometheus-client conventions: ``tabletopic_`` prefix, the unit
in the name, and labels bounded by configuration (connector, table, topic,
partition) and never by data.
"""

from __future__ import annotations

import contextlib
import os
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

_COMMIT_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)


class _Families:
    """Every metric family of a daemon, created once on its registry; connectors bind their label."""

    def __init__(self, registry: CollectorRegistry) -> None:
        def counter(name: str, doc: str, labels: Iterable[str] = ()) -> Counter:
            return Counter(name, doc, ["connector", *labels], registry=registry)

        def gauge(name: str, doc: str, labels: Iterable[str] = ()) -> Gauge:
            return Gauge(name, doc, ["connector", *labels], registry=registry)

        def histogram(name: str, doc: str, labels: Iterable[str]) -> Histogram:
            return Histogram(name, doc, ["connector", *labels], registry=registry, buckets=_COMMIT_BUCKETS)

        self.records_consumed = counter("tabletopic_records_consumed", "Records consumed", ["topic"])
        self.stage_seconds = counter("tabletopic_stage_seconds",
                                     "Wall seconds spent in each stage of the data path (fetch, take, convert, "
                                     "buffer, encode, handoff, write, commit)", ["stage"])
        self.stage_cpu_seconds = counter("tabletopic_stage_cpu_seconds",
                                         "CPU seconds of the Python thread running each stage (the JVM's own CPU "
                                         "is not in it)", ["stage"])
        self.bytes_consumed = counter("tabletopic_consumed_bytes", "Key and value bytes consumed", ["topic"])
        self.records_written = counter("tabletopic_records_written", "Records committed to a table", ["table"])
        self.commits = counter("tabletopic_commits", "Snapshots committed", ["table"])
        self.commit_failures = counter("tabletopic_commit_failures", "Commits that failed or were fenced",
                                       ["table"])
        self.committed_deletes = counter(
            "tabletopic_committed_deletes",
            "Delete records the sink's commits added, by kind: position (rows named by file and position) or "
            "equality (rows readers must match by key until maintenance converts them: commits during a "
            "compaction, past equality-deletes.commit-max-rows, or with equality-deletes.convert other than commit)",
            ["table", "kind"])
        self.commit_retries = counter("tabletopic_commit_retries",
                                      "Commits retried after another writer committed first", ["table"])
        self.catalog_failures = counter("tabletopic_catalog_failures",
                                        "Catalog, storage or Schema Registry failures while converting records or "
                                        "opening, creating or evolving a table (the records are read again, never "
                                        "dead-lettered)")
        self.system_unavailable = gauge("tabletopic_system_unavailable",
                                        "1 while a system the sink needs (catalog, storage, Schema Registry) does "
                                        "not answer: records wait to be read again; 0 once it answers")
        self.rounds = counter("tabletopic_rounds", "Commit rounds run", ["reason"])
        # The earlier name of tabletopic_rounds_total, kept for dashboards and alerts that use it.
        self.barriers = counter("tabletopic_barriers", "Commit rounds run (the earlier name of tabletopic_rounds)",
                                ["reason"])
        self.failed_records = counter("tabletopic_failed_records", "Records that failed a stage", ["stage"])
        self.skipped_records = counter(
            "tabletopic_skipped_records",
            "Records dynamic routing left out, as the Iceberg sink does (tabletopic.routing.unroutable=skip), by "
            "why: no_route (the route field is null or absent) or no_table (it names a table that does not "
            "exist while auto-create is off)", ["reason"])
        self.dead_letter_records = counter("tabletopic_dead_letter_records",
                                           "Records sent to the dead-letter topic")
        self.commit_seconds = histogram("tabletopic_commit_latency_seconds",
                                        "From the start of the commit round to the committed snapshot", ["table"])
        self.write_seconds = histogram("tabletopic_spark_write_seconds", "Spark job writing one table's files",
                                       ["table"])
        self.last_commit = gauge("tabletopic_last_commit_timestamp_seconds",
                                 "Unix time of the last successful commit", ["table"])
        self.buffered_records = gauge("tabletopic_buffered_records", "Records buffered, not yet written")
        self.buffered_bytes = gauge("tabletopic_buffered_bytes", "Bytes buffered, not yet written")
        self.assigned_partitions = gauge("tabletopic_assigned_partitions", "Partitions assigned to this daemon")
        self.tables_loaded = gauge("tabletopic_tables_loaded",
                                   "Tables held loaded (an Iceberg table object and its metadata each), at most "
                                   "tabletopic.tables.max-cached; a table unused for tabletopic.tables.idle-release-ms "
                                   "is released")
        self.coordinator = gauge("tabletopic_coordinator", "1 while this daemon coordinates the connector's commits")
        self.control_messages_skipped = counter(
            "tabletopic_control_messages_skipped",
            "Control-topic records skipped: not a valid message, or claiming a generation the group never had")
        self.commit_stalled_seconds = gauge(
            "tabletopic_commit_stalled_seconds",
            "Seconds since a round last committed (coordinator) or this worker's answer got a verdict, once "
            "over the stall bound; 0 otherwise")
        self.answers_rejected = counter("tabletopic_answers_rejected",
                                        "This worker's answers to rounds that the coordinator rejected (re-read)")
        self.lag = gauge("tabletopic_consumer_lag_records",
                         "Fetch highwater minus the next offset to process", ["topic", "partition"])
        self.committed_lag = gauge("tabletopic_committed_lag_records",
                                   "Fetch highwater minus the offset committed to the tables",
                                   ["topic", "partition"])
        self.table_data_files = gauge("tabletopic_table_data_files", "Live data files in the table", ["table"])
        self.table_delete_files = gauge("tabletopic_table_delete_files", "Live delete files in the table", ["table"])
        self.table_snapshots = gauge("tabletopic_table_snapshots", "Snapshots in the table's metadata", ["table"])
        self.table_bytes = gauge("tabletopic_table_bytes", "Total size of the table's live files", ["table"])
        self.maintenance_runs = counter("tabletopic_maintenance_runs",
                                        "Maintenance steps run (convert, compact, expire, manifests, orphans)",
                                        ["table", "step"])
        self.maintenance_failures = counter("tabletopic_maintenance_failures",
                                            "Maintenance runs that failed (retried at the next look)", ["table"])
        self.maintenance_seconds = histogram("tabletopic_maintenance_seconds", "One table's maintenance run",
                                             ["table"])
        self.maintenance_rewritten_bytes = counter("tabletopic_maintenance_rewritten_bytes",
                                                   "Bytes of data files rewritten by compaction", ["table"])
        self.equality_deletes_converted = counter(
            "tabletopic_maintenance_equality_deletes_converted",
            "Equality delete files turned into position deletes", ["table"])
        self.conversions_refused = counter(
            "tabletopic_maintenance_conversions_refused",
            "Conversions refused because a data file they named was replaced meanwhile (tried again next time)",
            ["table"])
        self.last_maintenance = gauge("tabletopic_last_maintenance_timestamp_seconds",
                                      "Unix time of the table's last maintenance run that did something",
                                      ["table"])
        self.newest: dict[tuple[str, str], float] = {}
        registry.register(_FreshnessCollector(self.newest))


class SinkMetrics:
    """One connector's view of the daemon's metrics: the connector label is bound."""

    def __init__(self, registry: CollectorRegistry, connector: str) -> None:
        families = _families(registry)
        self.connector = connector
        self._families = families
        c = {"connector": connector}
        self._stages: dict[str, tuple[Any, Any]] = {}
        for name, metric in vars(families).items():
            if isinstance(metric, (Counter, Gauge, Histogram)):
                setattr(self, name, _Bound(metric, c))

    @contextlib.contextmanager
    def timed(self, stage: str) -> Iterator[None]:
        """Count the wall and thread CPU seconds of a synchronous stretch of one stage."""
        wall, cpu = time.perf_counter(), time.thread_time()
        try:
            yield
        finally:
            self.add_stage(stage, time.perf_counter() - wall, time.thread_time() - cpu)

    def add_stage(self, stage: str, wall_s: float, cpu_s: float) -> None:
        children = self._stages.get(stage)
        if children is None:
            # Looked up once: a thousand partitions' ingests time several stages each, every fetch.
            children = self._stages[stage] = (self.stage_seconds.labels(stage=stage),
                                              self.stage_cpu_seconds.labels(stage=stage))
        children[0].inc(wall_s)
        children[1].inc(cpu_s)

    if TYPE_CHECKING:
        # The families are bound in __init__ by name, so the checker learns their type here.
        def __getattr__(self, name: str) -> _Bound: ...

    def note_committed_timestamp(self, table: str, newest_ms: int) -> None:
        key = (self.connector, table)
        self._families.newest[key] = max(self._families.newest.get(key, 0.0), newest_ms / 1000.0)

    def forget_partition(self, topic: str, partition: int) -> None:
        for g in (self._families.lag, self._families.committed_lag):
            with contextlib.suppress(KeyError):
                g.remove(self.connector, topic, str(partition))


_FAMILIES: weakref.WeakKeyDictionary[CollectorRegistry, _Families] = weakref.WeakKeyDictionary()


def _families(registry: CollectorRegistry) -> _Families:
    # Keyed by registry, not global: each daemon has its own registry and so its own families.
    if registry not in _FAMILIES:
        _FAMILIES[registry] = _Families(registry)
    return _FAMILIES[registry]


class _FreshnessCollector(Collector):
    """Freshness is computed at scrape time: now minus the newest record timestamp committed."""

    def __init__(self, newest: dict[tuple[str, str], float]) -> None:
        self._newest = newest

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily("tabletopic_data_freshness_seconds",
                                   "Now minus the newest record timestamp committed to the table",
                                   labels=["connector", "table"])
        now = time.time()
        for (connector, table), newest in self._newest.items():
            family.add_metric([connector, table], max(0.0, now - newest))
        yield family


class _JvmMemoryCollector(Collector):
    def __init__(self, heap: Callable[[], dict[str, int] | None]) -> None:
        self._heap = heap  # by area (used, committed, max); None while no JVM runs

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily("tabletopic_jvm_memory_bytes", "Spark driver JVM heap", labels=["area"])
        for area, size in (self._heap() or {}).items():
            family.add_metric([area], size)
        yield family


CONNECTOR_STATES = ("UNASSIGNED", "RUNNING", "PAUSED", "STOPPED", "FAILED", "RESTARTING")


class _ConnectorStates(Collector):
    """Each connector's state on this worker and its readiness, read at scrape time from the herder."""

    def __init__(self, states: Callable[[], dict[str, tuple[str, bool]]]) -> None:
        self._states = states

    def collect(self) -> Iterator[Metric]:
        state = GaugeMetricFamily("tabletopic_connector_state",
                                  "1 for the connector's state on this worker (Kafka Connect's task states), 0 for "
                                  "the others", labels=["connector", "state"])
        ready = GaugeMetricFamily("tabletopic_connector_ready", "1 while the connector is ready, as /ready says",
                                  labels=["connector"])
        for name, (current, ok) in sorted(self._states().items()):
            for known in CONNECTOR_STATES:
                state.add_metric([name, known], 1.0 if known == current else 0.0)
            ready.add_metric([name], 1.0 if ok else 0.0)
        yield state
        yield ready


def connector_states(states: Callable[[], dict[str, tuple[str, bool]]]) -> Collector:
    return _ConnectorStates(states)


def new_registry(heap: Callable[[], dict[str, int] | None]) -> CollectorRegistry:
    """A daemon's registry: process metrics (RSS, CPU, fds) and the JVM heap, plus each connector's."""
    registry = CollectorRegistry(auto_describe=True)
    ProcessCollector(namespace="tabletopic", pid=lambda: os.getpid(), registry=registry)
    registry.register(_JvmMemoryCollector(heap))
    return registry


class _Bound:
    """A metric with the connector label bound: ``.labels(table=...)`` adds the rest."""

    def __init__(self, metric: Any, base: dict[str, str]) -> None:
        self._metric = metric
        self._base = base

    def labels(self, **labels: str) -> Any:
        return self._metric.labels(**self._base, **{k: str(v) for k, v in labels.items()})

    def remove(self, *values: str) -> None:
        self._metric.remove(*values)

    def __getattr__(self, name: str) -> Any:
        # Unlabelled metrics (only the connector label) are used directly: metric.inc().
        return getattr(self._metric.labels(**self._base), name)
