"""Helpers shared by the tests: topics, producing, daemons as real processes, and table readers."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import duckdb
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from prometheus_client.parser import text_string_to_metric_families

from tabletopic.consume.group_offsets import committed_offsets
from tabletopic.demo.broker import create_topic as create_topic_async
from tabletopic.demo.lake_servers import duckdb_offline
from tabletopic.kafka.clients import KafkaClients
from tabletopic.ops.table_integrity import check_table
from tabletopic.write.pyiceberg_catalog import open_catalog_table
from tabletopic.write.spark_session import SparkRuntime

ROOT = Path(__file__).resolve().parent.parent
# The tests' JVMs live seconds to minutes and two cores run several: C1 alone and the serial collector
# cut their CPU by about a quarter (measured on tests/test_exactly_once.py), where C2 would not pay back.
TEST_JVM = {"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, name: str, partitions: int = 4) -> None:
    asyncio.run(create_topic_async(bootstrap, name, partitions))


Record = tuple[bytes | None, bytes | None, int]  # key, value, partition


def produce(bootstrap: str, topic: str, records: Iterable[Record],
            headers: list[tuple[str, bytes]] | None = None, max_request_size: int = 1048576) -> int:
    async def go() -> int:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=False,
                                    linger_ms=5, max_batch_size=256 * 1024, max_request_size=max_request_size)
        await producer.start()
        count = 0
        try:
            pending = []
            for key, value, partition in records:
                pending.append(await producer.send(topic, value=value, key=key, partition=partition,
                                                   headers=headers or []))
                count += 1
                if len(pending) >= 5000:
                    await asyncio.gather(*pending)
                    pending.clear()
            await asyncio.gather(*pending)
        finally:
            await producer.stop()
        return count
    return asyncio.run(go())


def group_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[tuple[str, int], int]:
    """The offsets consumer group ``group`` has committed for ``topic``'s partitions, as Kafka's tools see them."""
    return asyncio.run(committed_offsets(KafkaClients([bootstrap], {}), group,
                                         [(topic, p) for p in range(partitions)]))


def read_topic(bootstrap: str, topic: str, expected: int) -> list[tuple[bytes | None, dict[str, bytes]]]:
    """Every record of a topic, with its headers, once ``expected`` have arrived (and nothing more after)."""
    async def go() -> list[tuple[bytes | None, dict[str, bytes]]]:
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                    enable_auto_commit=False, group_id=None)
        await consumer.start()
        out: list[tuple[bytes | None, dict[str, bytes]]] = []
        try:
            for _ in range(40):
                batch = await consumer.getmany(timeout_ms=500)
                for records in batch.values():
                    out.extend((r.value, dict(r.headers)) for r in records)
                if len(out) >= expected:
                    await asyncio.sleep(1)  # and make sure nothing more arrives
                    for records in (await consumer.getmany(timeout_ms=500)).values():
                        out.extend((r.value, dict(r.headers)) for r in records)
                    break
        finally:
            await consumer.stop()
        return out
    return asyncio.run(go())


def write_props(path: Path, props: dict[str, Any]) -> Path:
    """A .properties file as Java's ``Properties.store`` writes one: a backslash in a value is doubled (a regex's
    ``\\d`` would otherwise be read as ``d``)."""
    path.write_text("".join(f"{k}={str(v).replace(chr(92), chr(92) * 2)}\n" for k, v in props.items()))
    return path


def worker_props(bootstrap: str, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "listeners": "",
        "consumer.session.timeout.ms": 6000,
        "consumer.heartbeat.interval.ms": 1000,
        "log.format": "json",
        "spark.driver.memory": "1g",
        "spark.master": "local[1]",
        **TEST_JVM,
        **extra,
    }


def registry_worker(bootstrap: str, value_converter: str) -> tuple[dict[str, Any], str]:
    """Worker properties that serve the built-in Schema Registry on a free port, with its own schemas
    topic and ``value_converter`` as the worker's; and the registry's URL."""
    from tabletopic.demo.broker import free_port
    url = f"http://127.0.0.1:{free_port()}"
    return worker_props(bootstrap, **{"schema.registry.listeners": url, "schema.registry.topic": unique("_schemas"),
                                      "value.converter": value_converter}), url


STARTED: list[DaemonProcess] = []  # every daemon a test started; conftest stops leftovers


class DaemonProcess:
    """``tabletopic standalone`` (or ``distributed``) as a child process, so tests can SIGKILL it."""

    def __init__(self, workdir: Path, worker: dict[str, Any], connectors: list[dict[str, Any]],
                 env: dict[str, str] | None = None, mode: str = "standalone") -> None:
        self.workdir = workdir
        self.mode = mode
        self.env = {**os.environ, **(env or {})}
        self.worker_file = write_props(workdir / "worker.properties", worker)
        self.connector_files = [write_props(workdir / f"connector-{i}.properties", c)
                                for i, c in enumerate(connectors)]
        self.proc: subprocess.Popen[bytes] | None = None
        self.runs = 0

    @property
    def log_path(self) -> Path:
        return self.workdir / f"daemon-{self.runs}.log"

    def start(self) -> DaemonProcess:
        self.runs += 1
        log = open(self.log_path, "wb")  # noqa: SIM115 - handed to the child
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tabletopic.cli", self.mode, str(self.worker_file),
             *map(str, self.connector_files)],
            cwd=self.workdir, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=self.env)
        log.close()
        STARTED.append(self)
        return self

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def terminate(self, timeout: float = 120) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)

    def wait(self, timeout: float) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout=timeout)

    def output(self) -> str:
        return "\n".join((self.workdir / f"daemon-{i}.log").read_text(errors="replace")
                         for i in range(1, self.runs + 1))

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def wait_until(condition: Callable[[], bool], timeout: float, what: str, daemon: DaemonProcess | None = None,
               every: float = 0.5) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        if daemon is not None and not daemon.alive():
            raise AssertionError(f"daemon exited while waiting for {what}:\n{daemon.output()[-5000:]}")
        time.sleep(every)
    tail = daemon.output()[-5000:] if daemon is not None else ""
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}\n{tail}")


class Warehouse:
    """A catalog registered in the test SparkSession under its own name: by default a hadoop catalog
    on a local directory, or any catalog's ``props``."""

    def __init__(self, spark: SparkRuntime, root: Path, props: dict[str, str] | None = None,
                 name: str | None = None) -> None:
        self.spark = spark
        self.root = root
        self.catalog = name or unique("wh")  # a JDBC catalog keeps its tables under its name
        # No table cache: the daemons commit behind this session's back.
        self.props = {**(props or {"type": "hadoop", "warehouse": "file://" + str(root)}), "cache-enabled": "false"}
        spark.register_catalog(self.catalog, self.props)

    def connector_props(self) -> dict[str, str]:
        return {"iceberg.catalog": self.catalog, **{f"iceberg.catalog.{k}": v for k, v in self.props.items()}}

    def table(self, name: str) -> Any:
        catalog = self.spark.iceberg_catalog(self.catalog)
        return catalog.loadTable(self.spark.jvm.org.apache.iceberg.catalog.TableIdentifier.parse(name))

    def exists(self, name: str) -> bool:
        catalog = self.spark.iceberg_catalog(self.catalog)
        return bool(catalog.tableExists(self.spark.jvm.org.apache.iceberg.catalog.TableIdentifier.parse(name)))

    def assert_intact(self, table: str) -> None:
        """Every file the table's head snapshots name is in storage at its recorded size (read by pyiceberg,
        not by the JVM that wrote them): what ``tabletopic verify`` checks."""
        report = check_table(open_catalog_table(self.catalog, self.props, table), table)
        assert report.intact, "\n".join(report.describe())

    def sql(self, query: str) -> list[Any]:
        """Run ``query`` with ``{c}`` standing for this warehouse's catalog name."""
        return self.spark.session.sql(query.replace("{c}", self.catalog)).collect()

    def rows(self, table: str, columns: str = "*") -> list[Any]:
        return self.spark.session.sql(f"SELECT {columns} FROM {self.catalog}.{table}").collect()

    def snapshots(self, table: str) -> list[dict[str, Any]]:
        t = self.table(table)
        t.refresh()
        out = []
        for snap in t.snapshots():
            summary = {k: snap.summary().get(k) for k in snap.summary().keySet()}
            out.append({"id": snap.snapshotId(), "operation": snap.operation(), "summary": summary})
        return out

    def offsets(self, table: str, group: str) -> dict[tuple[str, int], int]:
        from tabletopic.write.java_snapshots import read_offsets
        if not self.exists(table):
            return {}
        t = self.table(table)
        t.refresh()
        return read_offsets(t, None, group)

    def location(self, table: str) -> str:
        return str(self.root / table.replace(".", "/"))

    def metadata_location(self, table: str) -> str:
        """The table's current metadata file: what a reader without a catalog opens."""
        t = self.table(table)
        t.refresh()
        return str(t.operations().current().metadataFileLocation())


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(port: int) -> tuple[str, Samples]:
    """The daemon's /metrics: its text, and each sample's value by name and labels."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return text, parse_samples(text)


def parse_samples(text: str) -> Samples:
    """Each sample's value of a Prometheus text page, by name and labels."""
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def values(samples: Samples, name: str, **labels: str) -> list[float]:
    return [v for (n, ls), v in samples.items() if n == name and all((k, x) in ls for k, x in labels.items())]


def duckdb_connection(s3: bool = False) -> duckdb.DuckDBPyConnection:
    """DuckDB with the iceberg extension loaded from its wheel (and avro, which it needs; httpfs for
    S3): no network."""
    return duckdb_offline("avro", "iceberg", *(("httpfs",) if s3 else ()))


def run_in_process(spark: SparkRuntime, worker: dict[str, Any], connectors: list[dict[str, Any]],
                   until: Callable[[Any], bool], timeout: float = 120,
                   during: Callable[[Any], Any] | None = None) -> tuple[int, Any]:
    """Run a Standalone in this process on the shared SparkSession until ``until(daemon)`` holds.

    ``during(daemon)`` is awaited once the daemon runs (to scrape its HTTP listener, say).
    Returns the exit code and the daemon.
    """
    from tabletopic.app.standalone import Standalone
    from tabletopic.config.connector import parse_connector
    from tabletopic.config.worker import parse_worker

    parsed_worker = parse_worker(worker)
    daemon = Standalone(parsed_worker, [parse_connector(c, parsed_worker) for c in connectors], spark)

    async def go() -> int:
        runner = asyncio.ensure_future(daemon.run())
        deadline = time.monotonic() + timeout
        pending_during = during
        timed_out = False
        error: Exception | None = None
        try:
            while not runner.done():
                await asyncio.sleep(0.3)
                # A failed connector leaves its group, so its partitions go: its state says it is done.
                if daemon.connectors and all(c.task.assigned or c.state == "FAILED" for c in daemon.connectors):
                    if pending_during is not None:
                        await pending_during(daemon)
                        pending_during = None
                    if until(daemon):
                        break
                if time.monotonic() > deadline:
                    timed_out = True
                    break
        except Exception as exc:  # the test's own check failed: still stop the daemon first
            error = exc
        finally:
            daemon.stop_requested.set()
        # Let the daemon shut down as it would on SIGTERM, so a failing test leaves nothing running.
        code = await asyncio.wait_for(runner, 150)
        if error is not None:
            raise error
        if timed_out:
            raise AssertionError(f"in-process daemon: condition not met in {timeout:.0f}s (it exited {code})")
        return code

    return asyncio.run(go()), daemon


class Rest:
    """A daemon's HTTP listener through a real HTTP client: status codes and JSON bodies."""

    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.base + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                status, text = response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            status, text = exc.code, exc.read().decode()
        return status, json.loads(text) if text else None

    def get(self, path: str) -> Any:
        status, body = self.call("GET", path)
        assert status == 200, (path, status, body)
        return body

    def first_task(self, connector: str) -> dict[str, Any]:
        """The connector's first task's status, or {} while there is none (or nothing listens yet)."""
        if self.status_of("/") != 200:
            return {}
        code, status = self.call("GET", f"/connectors/{connector}/status")
        return status["tasks"][0] if code == 200 and status["tasks"] else {}

    def status_of(self, path: str) -> int:
        """A GET's status code; 0 while nothing listens."""
        try:
            return self.call("GET", path)[0]
        except OSError:
            return 0

    def metric(self, name: str, **labels: str) -> float:
        """The sum of ``name``'s samples that carry ``labels``."""
        text = urllib.request.urlopen(self.base + "/metrics", timeout=10).read().decode()
        return sum(values(parse_samples(text), name, **labels))


def connector_props(prefix: str, topics: str, table: str | None, warehouse: Warehouse,
                    props: dict[str, Any] | None = None) -> dict[str, Any]:
    """A connector named ``prefix`` plus a unique suffix, reading ``topics`` into ``table`` (None: routed)
    in ``warehouse``'s catalog, with ``props`` on top."""
    out: dict[str, Any] = {"name": unique(prefix), "topics": topics}
    if table is not None:
        out["iceberg.tables"] = table
    return {**out, **warehouse.connector_props(), **(props or {})}


def listening_daemon(tmp_path: Path, bootstrap: str, connectors: list[dict[str, str]]) -> tuple[DaemonProcess, Rest]:
    """A daemon started with ``connectors`` and an HTTP listener on a free loopback port, and its REST API."""
    from tabletopic.demo.broker import free_port
    port = free_port()
    daemon = DaemonProcess(tmp_path, worker_props(bootstrap, listeners=f"http://127.0.0.1:{port}"), connectors)
    return daemon.start(), Rest(port)


def failed_task_trace(rest: Rest, connector: str, daemon: DaemonProcess) -> str:
    """Once the connector's task is FAILED, as Connect shows a failed task: its trace."""
    wait_until(lambda: rest.first_task(connector).get("state") == "FAILED", 180, "the task FAILED", daemon)
    return str(rest.first_task(connector).get("trace", ""))


def events(daemon: DaemonProcess, *names: str) -> list[dict[str, Any]]:
    """Every JSON log line of ``daemon`` whose event is one of ``names``, in the log's order."""
    out = []
    for line in daemon.output().splitlines():
        if line.startswith("{") and any(f'"{name}"' in line for name in names):
            doc = json.loads(line)
            if doc.get("event") in names:
                out.append(doc)
    return out
