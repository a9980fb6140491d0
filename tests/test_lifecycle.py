"""Start-up errors, graceful shutdown, and fencing of a writer whose table moved on."""

from __future__ import annotations

import gc
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import warnings
from pathlib import Path
from typing import Any

import pytest

from tabletopic.config.connector import parse_connector
from tabletopic.config.worker import parse_worker
from tabletopic.core import exit_codes
from tabletopic.demo.broker import free_port
from tabletopic.write.iceberg_tables import IcebergTables, TablesSettings
from tabletopic.write.spark_session import SparkRuntime
from tabletopic.write.table_committer import TableCommitter
from tests.support import (
    ROOT,
    DaemonProcess,
    Rest,
    Warehouse,
    connector_props,
    create_topic,
    group_offsets,
    produce,
    run_in_process,
    unique,
    wait_until,
    worker_props,
)


def _records(start: int, stop: int, partitions: int = 1) -> list[tuple[bytes, bytes, int]]:
    return [(str(i).encode(), json.dumps({"id": i, "v": f"r{i}"}).encode(), i % partitions)
            for i in range(start, stop)]


def _connector(topic: str, table: str, warehouse: Warehouse, **extra: Any) -> dict[str, Any]:
    return connector_props("life", topic, table, warehouse, {
        "value.converter.schemas.enable": "false", "iceberg.tables.auto-create-enabled": "true", **extra})


def test_unreachable_broker_is_a_clear_error(warehouse: Warehouse, tmp_path: Path) -> None:
    daemon = DaemonProcess(tmp_path, worker_props("127.0.0.1:1"), [_connector("t", "db.t", warehouse)]).start()
    assert daemon.wait(timeout=120) == exit_codes.UNAVAILABLE  # may come back: restarted
    assert "cannot reach Kafka; check bootstrap.servers" in daemon.output()
    assert "Traceback" not in daemon.output()


def test_unreachable_catalog_is_a_clear_error(bootstrap: str, tmp_path: Path) -> None:
    connector = {"name": "nocat", "topics": "t", "iceberg.tables": "db.t", "iceberg.catalog.type": "hadoop",
                 "iceberg.catalog.warehouse": "hdfs://127.0.0.1:1/warehouse",
                 "iceberg.hadoop.ipc.client.connect.max.retries": "0"}
    daemon = DaemonProcess(tmp_path, worker_props(bootstrap, **{"tabletopic.exit-on-connector-failure": "true"}),
                           [connector]).start()
    assert daemon.wait(timeout=120) == exit_codes.UNAVAILABLE
    output = daemon.output()
    assert "the Iceberg catalog 'iceberg' is not reachable" in output
    assert "Connection refused" in output and "check iceberg.catalog.*" in output


def test_sigterm_commits_what_is_buffered_and_exits_0(bootstrap: str, warehouse: Warehouse,
                                                       tmp_path: Path) -> None:
    topic, table = unique("term"), "life.term"
    create_topic(bootstrap, topic, 2)
    produce(bootstrap, topic, _records(0, 3000, 2))
    # A long interval: nothing is committed before the signal, so the last round must do it all.
    connector = _connector(topic, table, warehouse, **{"iceberg.control.commit.interval-ms": "600000"})
    port = free_port()
    daemon = DaemonProcess(tmp_path, worker_props(bootstrap, listeners=f"http://127.0.0.1:{port}"),
                           [connector]).start()

    def buffered() -> float:
        try:
            return Rest(port).metric("tabletopic_buffered_records")
        except OSError:  # not listening yet
            return 0

    # Both partitions' records in the buffers before the signal: what is not buffered by then is left to
    # the next start (a fresh clone's run signalled after one partition's batch: 1,500 committed).
    wait_until(lambda: buffered() == 3000, 120, "every record buffered", daemon)
    assert warehouse.offsets(table, f"connect-{connector['name']}") == {}
    assert daemon.terminate(timeout=120) == 0, daemon.output()[-3000:]
    rows = warehouse.sql(f"SELECT count(*), count(DISTINCT id) FROM {{c}}.{table}")[0]
    assert tuple(rows) == (3000, 3000)
    assert warehouse.offsets(table, f"connect-{connector['name']}") == {(topic, 0): 1500, (topic, 1): 1500}
    # The group's offsets follow the tables' before the consumer stops: lag tools see the stop's commit.
    assert group_offsets(bootstrap, f"connect-{connector['name']}", topic, 2) == {(topic, 0): 1500, (topic, 1): 1500}
    assert "never retrieved" not in daemon.output()


def test_a_writer_whose_table_moved_on_is_fenced(bootstrap: str, spark: SparkRuntime, warehouse: Warehouse) -> None:
    topic, table = unique("fence"), "life.fence"
    create_topic(bootstrap, topic, 1)
    produce(bootstrap, topic, _records(0, 100))
    connector = _connector(topic, table, warehouse, **{"iceberg.control.commit.interval-ms": "1500"})
    group = f"connect-{connector['name']}"
    state: dict[str, Any] = {"injected": False}

    def step(daemon: Any) -> bool:
        task = daemon.connectors[0].task
        offsets = task.committed_offsets(table)
        if not state["injected"] and offsets.get((topic, 0)) == 100:
            # Another writer takes partition 0 and commits up to 150, as a new owner would.
            handle = daemon.connectors[0].parts.sink.tables.get(table)
            TableCommitter(spark, "other", group).commit(
                handle, None, {(topic, 0): 150}, {(topic, 0): 100}, None)
            state["injected"] = True
            state["producer"] = threading.Thread(target=produce, args=(bootstrap, topic, _records(100, 200)))
            state["producer"].start()
        return state["injected"] and offsets.get((topic, 0)) == 200

    code, daemon = run_in_process(spark, worker_props(bootstrap), [connector], until=step, timeout=180)
    state["producer"].join()
    assert code == 0
    ids = sorted(r.id for r in warehouse.rows(table, "id"))
    # 100..149 belong to the other writer: this one must neither write them nor anything twice.
    assert ids == list(range(100)) + list(range(150, 200))
    labels = {"connector": connector["name"], "table": table}
    assert daemon.registry.get_sample_value("tabletopic_commit_failures_total", labels) >= 1


def test_a_failed_write_reads_its_records_again(bootstrap: str, spark: SparkRuntime, warehouse: Warehouse) -> None:
    """The table has no offsets yet, so only the sink itself knows where its uncommitted records began."""
    topic, table = unique("rewrite"), "life.rewrite"
    create_topic(bootstrap, topic, 2)
    warehouse.sql(f"CREATE TABLE {{c}}.{table} (id bigint, v string) USING iceberg")
    blocker = Path(warehouse.location(table)) / "data"
    blocker.write_text("a file where the data directory goes: every write fails until it is removed")
    produce(bootstrap, topic, _records(0, 300, partitions=2))
    connector = _connector(topic, table, warehouse, **{"iceberg.control.commit.interval-ms": "700"})
    failures = 0

    def step(daemon: Any) -> bool:
        nonlocal failures
        task = daemon.connectors[0].task
        if task.last_error and "writing files failed" in task.last_error and blocker.is_file():
            failures += 1
            if failures >= 2:  # seen failing across two polls; now let writes succeed
                blocker.unlink()
        return sum(task.committed_offsets(table).values()) >= 300

    code, _ = run_in_process(spark, worker_props(bootstrap), [connector], until=step, timeout=180)
    assert code == 0 and failures >= 2
    ids = sorted(r.id for r in warehouse.rows(table, "id"))
    assert ids == list(range(300))


def test_a_coordinator_of_an_older_generation_is_refused(spark: SparkRuntime, warehouse: Warehouse) -> None:
    from tabletopic.write.table_committer import CommitFenced

    table = "life.epochs"
    warehouse.sql(f"CREATE TABLE {{c}}.{table} (id bigint) USING iceberg")
    tables = IcebergTables(spark, TablesSettings.of(parse_connector(
        {"name": "epochs", "topics": "t", "iceberg.tables": table, **warehouse.connector_props()}, parse_worker({}))))
    handle = tables.get(table)
    committer = TableCommitter(spark, "epochs", "connect-epochs")
    committer.commit(handle, None, {("t", 0): 10}, {}, None, epoch=7)
    with pytest.raises(CommitFenced, match="epoch 7, newer than this coordinator's 6"):
        committer.commit(handle, None, {("t", 0): 20}, {("t", 0): 10}, None, epoch=6)
    committer.commit(handle, None, {("t", 0): 20}, {("t", 0): 10}, None, epoch=8)
    assert warehouse.offsets(table, "connect-epochs") == {("t", 0): 20}


def _java_child(pid: int) -> int:
    """The driver JVM the daemon ``pid`` started (a child in a session of its own)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid and "java" in (stat.parent / "cmdline").read_bytes().decode(errors="replace"):
                return int(stat.parent.name)
        except (OSError, IndexError, ValueError):
            continue
    raise AssertionError(f"no java child of {pid}")


@pytest.mark.slow
def test_a_killed_jvm_stops_the_daemon_and_a_restart_loses_nothing(bootstrap: str, warehouse: Warehouse,
                                                                 tmp_path: Path) -> None:
    topic, table = unique("jvmkill"), "life.jvmkill"
    create_topic(bootstrap, topic, 1)
    port = free_port()
    connector = _connector(topic, table, warehouse, **{"iceberg.control.commit.interval-ms": "1000"})
    group = f"connect-{connector['name']}"
    daemon = DaemonProcess(tmp_path, worker_props(bootstrap, listeners=f"http://127.0.0.1:{port}"),
                           [connector]).start()
    produce(bootstrap, topic, _records(0, 2000))
    wait_until(lambda: sum(warehouse.offsets(table, group).values()) == 2000, 120, "a first commit", daemon)
    produce(bootstrap, topic, _records(2000, 3000))
    assert daemon.proc is not None
    jvm = _java_child(daemon.proc.pid)
    os.kill(jvm, signal.SIGKILL)
    answers = []
    # From the moment the kill returns, while the JVM dies and until the daemon exits, every 50 ms:
    # /health must never say the daemon is well.
    while daemon.alive():
        try:
            answers.append(urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).status)
        except urllib.error.HTTPError as exc:
            answers.append(exc.code)
        except OSError:
            answers.append(0)  # the listener is already closed
        time.sleep(0.05)
    assert daemon.wait(timeout=60) == exit_codes.FAILED, daemon.output()[-3000:]
    assert 200 not in answers and answers, answers
    assert "the Spark driver JVM died" in daemon.output()
    daemon.start()  # what systemd or Kubernetes does: the table goes on from its offsets
    wait_until(lambda: sum(warehouse.offsets(table, group).values()) == 3000, 120, "everything committed", daemon)
    assert daemon.terminate() == 0
    count, distinct = warehouse.sql(f"SELECT count(*), count(DISTINCT id) FROM {{c}}.{table}")[0]
    assert (count, distinct) == (3000, 3000)


@pytest.mark.parametrize("moment", ['"spark session started"', '"partitions revoked"', '"connector started"'])
def test_sigterm_during_start_up_stops_within_the_stop_timeout(moment: str, bootstrap: str, warehouse: Warehouse,
                                                               tmp_path: Path) -> None:
    topic = unique("early")
    create_topic(bootstrap, topic, 1)
    connectors = [_connector(topic, f"life.early{i}", warehouse) for i in range(2)]
    daemon = DaemonProcess(tmp_path, worker_props(bootstrap), connectors).start()
    wait_until(lambda: moment in daemon.output(), 120, f"start-up reaches {moment}", daemon, every=0.05)
    unit = (ROOT / "deploy" / "systemd" / "tabletopic.service").read_text()
    stop_timeout = int(re.search(r"^TimeoutStopSec=(\d+)s", unit, re.M).group(1))  # type: ignore[union-attr]
    assert daemon.terminate(timeout=stop_timeout) == exit_codes.OK, daemon.output()[-3000:]
    assert '"stopped"' in daemon.output()


def test_a_second_signal_exits_at_once_without_a_final_commit(monkeypatch: pytest.MonkeyPatch) -> None:
    # Two signals sent back to back reach a process as one, so the handler is driven directly.
    from tabletopic.app import daemon as process
    from tabletopic.app.standalone import Standalone

    exits: list[int] = []
    monkeypatch.setattr(process.os, "_exit", exits.append)
    daemon = Standalone(parse_worker({"listeners": ""}), [])
    daemon._on_signal(signal.SIGTERM)
    assert daemon.stop_requested.is_set() and exits == []  # the first asks for a graceful stop
    daemon._on_signal(signal.SIGTERM)
    assert exits == [exit_codes.FAILED]


def test_a_signal_before_the_daemon_is_built_stops_it_at_its_first_step() -> None:
    """The command holds SIGTERM while its modules load and the daemon is built (seconds, with Spark);
    by default it would kill the process without a word. Held, it stops the daemon once it runs."""
    import asyncio

    from tabletopic.app.standalone import Standalone
    from tabletopic.cli import _hold_stop_signals

    before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        pending = _hold_stop_signals()
        signal.raise_signal(signal.SIGTERM)  # delivered to this, the main thread, before the next line
        assert pending == [signal.SIGTERM]

        async def build_install_and_run() -> int:
            daemon = Standalone(parse_worker({"listeners": ""}), [])
            daemon.install_signal_handlers(pending)
            assert daemon.stop_requested.is_set()
            return await daemon.run()

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert asyncio.run(build_install_and_run()) == exit_codes.OK
            gc.collect()  # a step's coroutine never awaited is reported when it is collected
        assert not [w for w in caught if "never awaited" in str(w.message)], [str(w.message) for w in caught]
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def test_a_configuration_error_exits_78(tmp_path: Path) -> None:
    worker, connector = tmp_path / "w.properties", tmp_path / "c.properties"
    worker.write_text("bootstrap.servers=127.0.0.1:9\nlisteners=\n")
    connector.write_text("name=x\ntopics=t\niceberg.tables=db.t\niceberg.control.commit.interval-ms=soon\n")
    proc = subprocess.run([sys.executable, "-m", "tabletopic.cli", "standalone", str(worker), str(connector)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == exit_codes.CONFIG
    assert "iceberg.control.commit.interval-ms='soon': must be a whole number" in proc.stderr
