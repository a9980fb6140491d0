"""Kafka Connect's REST API against a daemon started with no connector, through a real HTTP client.

Every body is compared field by field with the shape Connect answers (``connect/runtime``
``rest/entities``), and every change is checked where it lands: in the table.
"""

from __future__ import annotations

import contextlib
import functools
import json
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from http.server import HTTPServer
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from kafka_connect_api.errors import GenericNotFound
from kafka_connect_api.kafka_connect_api import Api, Cluster
from kafka_connect_healthcheck.handler import RequestHandler
from kafka_connect_healthcheck.health import Health

from tabletopic import __version__
from tabletopic.demo.broker import free_port
from tests.support import DaemonProcess, Rest, Warehouse, create_topic, produce, unique, wait_until, worker_props

SINK = "org.apache.iceberg.connect.IcebergSinkConnector"


def _records(start: int, stop: int) -> list[tuple[bytes, bytes, int]]:
    # id i goes to partition i % 2, so partition 0's offset k holds id 2k in each run of ids from 0.
    return [(str(i).encode(), json.dumps({"id": i, "v": f"r{i}"}).encode(), i % 2) for i in range(start, stop)]


def _count(warehouse: Warehouse, table: str) -> int:
    return int(warehouse.sql(f"SELECT count(*) FROM {{c}}.{table}")[0][0]) if warehouse.exists(table) else 0


@pytest.mark.slow
def test_connectors_over_rest_create_reconfigure_pause_stop_reset_offsets_and_delete(
        bootstrap: str, warehouse: Warehouse, tmp_path: Path) -> None:
    topic, table, name = unique("rest"), "rest.events", unique("rest")
    create_topic(bootstrap, topic, 2)
    port = free_port()
    worker_id = f"127.0.0.1:{port}"
    daemon = DaemonProcess(tmp_path, worker_props(bootstrap, listeners=f"http://127.0.0.1:{port}"), []).start()
    rest = Rest(port)
    wait_until(lambda: rest.status_of("/ready") == 200, 120, "the daemon to be ready with no connector", daemon)

    # The cluster id as the broker reports it to another client library.
    cluster_id = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30).cluster_id
    assert cluster_id and rest.get("/") == {"version": __version__, "commit": "", "kafka_cluster_id": cluster_id}
    assert rest.get("/connectors") == []
    plugins = rest.get("/connector-plugins")
    assert {"class": SINK, "type": "sink", "version": __version__} in plugins
    assert all(set(p) == {"class", "type", "version"} for p in plugins)

    config = {"connector.class": SINK, "topics": topic, "iceberg.tables": table,
              "value.converter.schemas.enable": "false", "iceberg.tables.auto-create-enabled": "true",
              "iceberg.tables.evolve-schema-enabled": "true", "iceberg.control.commit.interval-ms": "1000",
              **warehouse.connector_props()}
    # Validation: Connect's ConfigInfos, fed by the same checks as `tabletopic validate`.
    status, infos = rest.call("PUT", "/connector-plugins/IcebergSinkConnector/config/validate",
                              {**config, "name": name, "iceberg.control.commit.interval-ms": "soon"})
    assert status == 200 and set(infos) == {"name", "error_count", "groups", "configs"}
    assert infos["name"] == SINK and infos["error_count"] == 1
    interval = next(c for c in infos["configs"] if c["value"]["name"] == "iceberg.control.commit.interval-ms")
    assert set(interval) == {"definition", "value"}
    assert set(interval["definition"]) == {"name", "type", "required", "default_value", "importance",
                                           "documentation", "group", "order", "width", "display_name", "dependents"}
    assert interval["definition"]["type"] == "INT" and interval["definition"]["default_value"] == "300000"
    assert interval["value"] == {"name": "iceberg.control.commit.interval-ms", "value": "soon",
                                 "recommended_values": [], "visible": True,
                                 "errors": ["iceberg.control.commit.interval-ms='soon': must be a whole number (int)"]}
    status, body = rest.call("POST", "/connectors", {"name": name, "config": {**config, "tasks.max": "soon"}})
    assert status == 400 and body["error_code"] == 400 and set(body) == {"error_code", "message"}
    assert body["message"].startswith("Connector configuration is invalid and contains the following 1 error(s):")

    # Create: records arrive.
    status, body = rest.call("POST", "/connectors", {"name": name, "config": config})
    assert status == 201, body
    assert body == {"name": name, "config": {**config, "name": name}, "tasks": body["tasks"], "type": "sink"}
    assert body["tasks"] in ([], [{"connector": name, "task": 0}])
    assert rest.call("POST", "/connectors", {"name": name, "config": config}) == \
        (409, {"error_code": 409, "message": f"Connector {name} already exists"})
    produce(bootstrap, topic, _records(0, 2000))
    wait_until(lambda: _count(warehouse, table) == 2000, 120, "the first records", daemon)

    running = {"name": name, "connector": {"state": "RUNNING", "worker_id": worker_id},
               "tasks": [{"id": 0, "state": "RUNNING", "worker_id": worker_id}], "type": "sink"}
    assert rest.get(f"/connectors/{name}/status") == running
    info = {"name": name, "config": {**config, "name": name}, "tasks": [{"connector": name, "task": 0}],
            "type": "sink"}
    assert rest.get(f"/connectors/{name}") == info
    # As JAX-RS does for Connect, every path takes a trailing slash (clients such as kafka-connect-api send it).
    assert rest.get(f"/connectors/{name}/") == info and rest.get("/connectors/") == [name]
    assert rest.get(f"/connectors/{name}/status/") == running
    assert rest.get(f"/connectors/{name}/config") == {**config, "name": name}
    assert rest.get("/connectors") == [name]
    assert rest.get("/connectors?expand=status&expand=info") == {name: {"status": running, "info": info}}
    assert rest.get(f"/connectors/{name}/tasks") == [{"id": {"connector": name, "task": 0},
                                                      "config": {**config, "name": name}}]
    assert rest.get(f"/connectors/{name}/tasks/0/status") == {"id": 0, "state": "RUNNING", "worker_id": worker_id}
    assert rest.call("GET", f"/connectors/{name}/tasks/1/status") == \
        (404, {"error_code": 404, "message": f"Task {name}-1 not found"})
    assert rest.get(f"/connectors/{name}/topics") == {name: {"topics": [topic]}}
    assert rest.call("PUT", f"/connectors/{name}/topics/reset") == (202, None)
    wait_until(lambda: rest.get(f"/connectors/{name}/topics") == {name: {"topics": []}}, 30, "topics reset")

    # Reconfigure: a transform adds a field, which the next records carry into the table.
    changed = {**config, "transforms": "src",
               "transforms.src.type": "org.apache.kafka.connect.transforms.InsertField$Value",
               "transforms.src.static.field": "src", "transforms.src.static.value": "v2"}
    starts = _starts(daemon)
    status, body = rest.call("PUT", f"/connectors/{name}/config", changed)
    assert status == 200 and body["config"] == {**changed, "name": name}
    # Connect answers before the task restarts: records sent before that may still meet the old one.
    wait_until(lambda: _starts(daemon) > starts, 120, "the connector restarted with its new configuration", daemon)
    produce(bootstrap, topic, _records(2000, 3000))
    wait_until(lambda: _count(warehouse, table) == 3000, 120, "records after the new configuration", daemon)
    sources = Counter(r.src for r in warehouse.rows(table, "src"))
    assert sources == {None: 2000, "v2": 1000}, sources

    # PATCH: one key changes, the others stay.
    starts = _starts(daemon)
    status, body = rest.call("PATCH", f"/connectors/{name}/config", {"iceberg.control.commit.interval-ms": "800"})
    assert status == 200 and body["config"]["iceberg.control.commit.interval-ms"] == "800"
    assert body["config"]["transforms.src.static.value"] == "v2"
    wait_until(lambda: _starts(daemon) > starts, 120, "the connector restarted with its patched configuration",
               daemon)

    # Offsets can only change while the connector is stopped.
    status, body = rest.call("PATCH", f"/connectors/{name}/offsets", {"offsets": [
        {"partition": {"kafka_topic": topic, "kafka_partition": 0}, "offset": {"kafka_offset": 0}}]})
    assert status == 400 and "must be in the STOPPED state" in body["message"]

    # Pause: records arrive, rounds go on, and no snapshot is made.
    assert rest.call("PUT", f"/connectors/{name}/pause") == (202, None)
    wait_until(lambda: rest.get(f"/connectors/{name}/status")["connector"]["state"] == "PAUSED" and
               rest.get(f"/connectors/{name}/status")["tasks"][0]["state"] == "PAUSED", 60, "PAUSED", daemon)
    # The task shows PAUSED once it takes no more records, and then commits what it took (everything was
    # in the table already here); two more rounds leave that commit, if any, behind the count below.
    rounds = rest.metric("tabletopic_rounds_total", connector=name)
    wait_until(lambda: rest.metric("tabletopic_rounds_total", connector=name) >= rounds + 2, 60,
               "the pause's round done", daemon)
    snapshots = len(warehouse.snapshots(table))
    produce(bootstrap, topic, _records(3000, 3600))
    rounds = rest.metric("tabletopic_rounds_total", connector=name)
    wait_until(lambda: rest.metric("tabletopic_rounds_total", connector=name) >= rounds + 3, 60,
               "three rounds while paused", daemon)
    assert len(warehouse.snapshots(table)) == snapshots and _count(warehouse, table) == 3000
    assert rest.call("PUT", f"/connectors/{name}/resume") == (202, None)
    wait_until(lambda: _count(warehouse, table) == 3600, 120, "the records held while paused", daemon)

    # Stop, move partition 0 back by 1,000 records, resume: exactly those are written again.
    assert rest.call("PUT", f"/connectors/{name}/stop") == (204, None)
    stopped = {"name": name, "connector": {"state": "STOPPED", "worker_id": worker_id}, "tasks": [], "type": "sink"}
    wait_until(lambda: rest.get(f"/connectors/{name}/status") == stopped, 60, "STOPPED", daemon)
    held = {(o["partition"]["kafka_topic"], o["partition"]["kafka_partition"]): o["offset"]["kafka_offset"]
            for o in rest.get(f"/connectors/{name}/offsets")["offsets"]}
    assert held == {(topic, 0): 1800, (topic, 1): 1800}
    assert rest.get(f"/connectors/{name}/offsets") == {"offsets": [
        {"partition": {"kafka_topic": topic, "kafka_partition": p}, "offset": {"kafka_offset": 1800}} for p in (0, 1)]}
    assert rest.call("PATCH", f"/connectors/{name}/offsets", {"offsets": [
        {"partition": {"kafka_topic": topic, "kafka_partition": 0}, "offset": {"kafka_offset": 800}}]}) == \
        (200, {"message": "The offsets for this connector have been altered successfully"})
    assert rest.get(f"/connectors/{name}/offsets")["offsets"][0]["offset"] == {"kafka_offset": 800}
    # The operator's CLI asks the same API.
    shown = _cli("offsets", name, "--url", rest.base)
    assert json.loads(shown) == rest.get(f"/connectors/{name}/offsets")
    status_text = _cli("status", "--url", rest.base)
    assert f"connector {name}: STOPPED (worker {worker_id})" in status_text
    assert f"{topic}[0]: tables 800" in status_text and f"{topic}[1]: tables 1800" in status_text
    assert rest.call("PUT", f"/connectors/{name}/resume") == (202, None)
    wait_until(lambda: _count(warehouse, table) == 4600, 120, "partition 0 read again from 800", daemon)
    counts = Counter(r.id for r in warehouse.rows(table, "id"))
    assert {i for i, n in counts.items() if n == 2} == {2 * k for k in range(800, 1800)}  # ids 1600..3598, even
    assert max(counts.values()) == 2 and len(counts) == 3600

    # A connector that cannot start is FAILED, with the reason, while the others go on; restart and delete.
    broken, bad_name = {"connector.class": SINK, "topics": topic, "iceberg.tables": "rest.nowhere",
                        "iceberg.catalog.type": "hadoop", "iceberg.catalog.warehouse": "hdfs://127.0.0.1:1/wh",
                        "iceberg.hadoop.ipc.client.connect.max.retries": "0"}, unique("broken")
    assert rest.call("POST", "/connectors", {"name": bad_name, "config": broken})[0] == 201
    wait_until(lambda: rest.get(f"/connectors/{bad_name}/status")["tasks"][:1] != [] and
               rest.get(f"/connectors/{bad_name}/status")["tasks"][0]["state"] == "FAILED", 120, "FAILED", daemon)
    failed = rest.get(f"/connectors/{bad_name}/status")
    assert "is not reachable" in failed["tasks"][0]["trace"] and failed["tasks"][0]["worker_id"] == worker_id
    assert rest.status_of("/ready") == 503
    assert rest.metric("tabletopic_connector_state", connector=bad_name, state="FAILED") == 1
    status, body = rest.call("POST", f"/connectors/{bad_name}/restart?includeTasks=true&onlyFailed=true")
    assert status == 202 and body["tasks"] == [{"id": 0, "state": "RESTARTING", "worker_id": worker_id}]
    assert rest.call("DELETE", f"/connectors/{bad_name}") == (204, None)
    wait_until(lambda: rest.status_of("/ready") == 200, 60, "ready without the broken connector", daemon)

    # Loggers, as Connect's logging API.
    loggers = rest.get("/admin/loggers")
    assert loggers["root"] == {"level": "INFO", "last_modified": None}
    assert rest.call("PUT", "/admin/loggers/tabletopic.commit", {"level": "DEBUG"}) == (200, ["tabletopic.commit"])
    assert rest.get("/admin/loggers/tabletopic.commit")["level"] == "DEBUG"

    # Delete: gone from the API, its consumer leaves, its table stays.
    assert rest.call("DELETE", f"/connectors/{name}") == (204, None)
    assert rest.call("GET", f"/connectors/{name}") == \
        (404, {"error_code": 404, "message": f"Connector {name} not found"})
    assert rest.get("/connectors") == []
    assert _count(warehouse, table) == 4600
    assert daemon.terminate() == 0

    # One log format: every line the daemon printed, Spark's and the libraries' included, is JSON.
    lines = daemon.output().splitlines()
    assert len(lines) > 50
    for line in lines:
        doc = json.loads(line)
        assert isinstance(doc, dict) and "event" in doc and "level" in doc, line


def _starts(daemon: DaemonProcess) -> int:
    return daemon.output().count('"event": "connector started"')


def _cli(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "tabletopic", *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


@pytest.mark.timeout(420)
@pytest.mark.slow
def test_connect_clients_drive_a_daemon_from_its_start_and_the_healthcheck_sidecar_watches_it(
        bootstrap: str, warehouse: Warehouse, tmp_path: Path) -> None:
    """Two clients nobody here wrote: kafka-connect-api's SDK and the healthcheck sidecar that Kubernetes
    deployments of Connect use as their liveness probe. As a provisioning script does, the SDK waits for
    GET /connectors and creates the connector while the JVM still starts."""
    topic, table, name = unique("early"), "rest.early", unique("early")
    create_topic(bootstrap, topic, 2)
    produce(bootstrap, topic, _records(0, 500))
    port = free_port()
    daemon = DaemonProcess(tmp_path, worker_props(bootstrap, listeners=f"http://127.0.0.1:{port}"), []).start()
    rest = Rest(port)
    cluster = Cluster(Api(url=rest.base))
    wait_until(lambda: rest.status_of("/connectors") == 200, 120, "GET /connectors", daemon, every=0.05)
    ready_status, ready = rest.call("GET", "/ready")
    assert ready_status == 503 and ready["phase"] != "starting connectors", ready  # the JVM is not up yet
    config = {"connector.class": SINK, "topics": topic, "iceberg.tables": table,
              "value.converter.schemas.enable": "false", "iceberg.tables.auto-create-enabled": "true",
              "iceberg.tables.evolve-schema-enabled": "true", "iceberg.control.commit.interval-ms": "1000",
              **warehouse.connector_props()}
    created = cluster.api.post_raw("/connectors", json={"name": name, "config": config})
    assert created.status_code == 201, created.text
    connector = cluster.connectors[name]
    assert connector.exists()  # GET /connectors/{name}/, with its trailing slash
    early = connector.status
    assert early["connector"]["state"] in ("UNASSIGNED", "RUNNING"), early
    seen: set[tuple[str, str]] = set()

    def states() -> tuple[str, str]:
        """The connector's state, then its task's from the task's own resource, as UIs read them."""
        shown = connector.state
        tasks = connector.tasks
        pair = (shown, tasks[0].state if tasks else "none")
        seen.add(pair)
        if shown in ("RUNNING", "PAUSED"):
            assert pair[1] in (shown, "FAILED"), f"the connector is {shown}, its task {pair[1]}"
        return pair

    # No other call: the worker runs it once it is up.
    wait_until(lambda: states() == ("RUNNING", "RUNNING") and _count(warehouse, table) == 500, 120,
               "the connector RUNNING and its records in the table", daemon, every=0.1)
    assert connector.status["tasks"][0]["worker_id"] == f"127.0.0.1:{port}"
    assert [t.config for t in connector.tasks] == [{**config, "name": name}]
    assert cluster.kafka_cluster == AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30).cluster_id

    with _healthcheck(rest.base) as probe:
        assert _probe(probe) == 200  # healthy while RUNNING

        connector.pause()
        wait_until(lambda: states() == ("PAUSED", "PAUSED"), 60, "PAUSED", daemon, every=0.1)
        connector.resume()
        wait_until(lambda: states() == ("RUNNING", "RUNNING"), 60, "RUNNING again", daemon, every=0.1)

        # Reconfigure: the SDK PUTs the whole config; the next records carry the new field.
        starts = _starts(daemon)
        connector.config = {**config, "transforms": "src",
                            "transforms.src.type": "org.apache.kafka.connect.transforms.InsertField$Value",
                            "transforms.src.static.field": "src", "transforms.src.static.value": "v2"}
        wait_until(lambda: _starts(daemon) > starts and states() == ("RUNNING", "RUNNING"), 120,
                   "the connector restarted with its new configuration", daemon, every=0.1)
        produce(bootstrap, topic, _records(500, 1000))
        wait_until(lambda: _count(warehouse, table) == 1000, 120, "records after the new configuration", daemon)
        assert Counter(r.src for r in warehouse.rows(table, "src")) == {None: 500, "v2": 500}

        starts = _starts(daemon)
        connector.restart_all_tasks()
        wait_until(lambda: _starts(daemon) > starts and states() == ("RUNNING", "RUNNING"), 120,
                   "the task restarted", daemon, every=0.1)
        assert _probe(probe) == 200

        # A bad record under errors.tolerance=none fails the task: the sidecar says so.
        produce(bootstrap, topic, [(b"x", b"{not json", 0)])
        wait_until(lambda: states()[1] == "FAILED", 120, "the task FAILED", daemon, every=0.1)
        assert "failed in convert" in connector.tasks[0].status["trace"]
        assert _probe(probe) == 503
    assert ("RUNNING", "FAILED") in seen  # as Connect shows a connector whose task failed

    connector.delete()
    with pytest.raises(GenericNotFound):
        connector.exists()  # the SDK raises on the 404 rather than answering False
    assert list(cluster.connectors) == [] and _count(warehouse, table) == 1000
    assert daemon.terminate() == 0


@contextlib.contextmanager
def _healthcheck(connect_url: str) -> Iterator[str]:
    """kafka-connect-healthcheck's own server and handler, on loopback (its main() binds every address)."""
    health = Health(connect_url, None, ["FAILED"], "", 0, ["connector", "task"])
    server = HTTPServer(("127.0.0.1", 0), functools.partial(RequestHandler, health))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _probe(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
