"""Distributed mode: two workers sharing a config topic, as ``connect-distributed`` workers share one."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from tabletopic.demo.broker import free_port
from tests.support import DaemonProcess, Rest, Warehouse, create_topic, produce, unique, wait_until, worker_props

SINK = "org.apache.iceberg.connect.IcebergSinkConnector"


def _records(start: int, stop: int) -> list[tuple[bytes, bytes, int]]:
    return [(str(i).encode(), json.dumps({"id": i}).encode(), i % 4) for i in range(start, stop)]


def _members(bootstrap: str, group: str) -> int:
    async def go() -> int:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            described = await admin.describe_consumer_groups([group])
        finally:
            await admin.close()
        return sum(len(g[5]) for response in described for g in response.groups)
    return asyncio.run(go())


def _exact(warehouse: Warehouse, table: str, n: int) -> bool:
    if not warehouse.exists(table):
        return False
    count, distinct = warehouse.sql(f"SELECT count(*), count(DISTINCT id) FROM {{c}}.{table}")[0]
    assert count == distinct, f"{count - distinct} duplicates"
    return int(count) == n


def _tasks(rest: Rest, name: str) -> list[tuple[str, str]]:
    try:
        status, body = rest.call("GET", f"/connectors/{name}/status")
    except OSError:  # not listening yet
        return []
    return [(t["worker_id"], t["state"]) for t in body["tasks"]] if status == 200 else []


@pytest.mark.slow
def test_two_workers_share_a_connector_through_the_config_topic(bootstrap: str, warehouse: Warehouse,
                                                                tmp_path: Path) -> None:
    topic, table, name = unique("dist"), "dist.events", unique("dist")
    create_topic(bootstrap, topic, 4)
    cluster = {"group.id": unique("cluster"), "config.storage.topic": unique("configs"),
               "status.storage.topic": unique("statuses"), "offset.storage.topic": unique("offsets"),
               "config.storage.replication.factor": 1, "status.storage.replication.factor": 1}
    ports = [free_port(), free_port()]
    workers: list[DaemonProcess] = []
    for i, port in enumerate(ports):
        (tmp_path / f"w{i}").mkdir()
        workers.append(DaemonProcess(tmp_path / f"w{i}", worker_props(
            bootstrap, listeners=f"http://127.0.0.1:{port}", **cluster), [], mode="distributed").start())
    a, b = (Rest(p) for p in ports)
    ids = [f"127.0.0.1:{p}" for p in ports]
    for rest, worker in zip((a, b), workers, strict=True):
        wait_until(lambda r=rest: r.status_of("/ready") == 200, 120, "a worker ready", worker)

    # Created on one worker, it runs on both, with the partitions split between them.
    config: dict[str, Any] = {"connector.class": SINK, "topics": topic, "iceberg.tables": table,
                              "value.converter.schemas.enable": "false", "iceberg.tables.auto-create-enabled": "true",
                              "iceberg.control.commit.interval-ms": "1000", **warehouse.connector_props()}
    assert a.call("POST", "/connectors", {"name": name, "config": config})[0] == 201
    both = sorted((w, "RUNNING") for w in ids)
    for rest in (a, b):
        wait_until(lambda r=rest: _tasks(r, name) == both, 120, "the connector running on both workers",
                   workers[0])
    assert b.get(f"/connectors/{name}/config") == {**config, "name": name}
    wait_until(lambda: all(r.metric("tabletopic_assigned_partitions", connector=name) > 0 for r in (a, b)), 60,
               "partitions on both workers", workers[1])
    assert sum(r.metric("tabletopic_assigned_partitions", connector=name) for r in (a, b)) == 4
    produce(bootstrap, topic, _records(0, 4000))
    wait_until(lambda: _exact(warehouse, table, 4000), 120, "the records through both workers", workers[0])

    # A worker killed and started again recovers the connector from the config topic.
    workers[0].kill()
    produce(bootstrap, topic, _records(4000, 6000))
    workers[0].start()
    for rest in (a, b):
        wait_until(lambda r=rest: _tasks(r, name) == both, 120, "the restarted worker running the connector again",
                   workers[0])
    produce(bootstrap, topic, _records(6000, 8000))
    wait_until(lambda: _exact(warehouse, table, 8000), 180, "every record after the restart", workers[0])

    # Deleted on the other worker, it stops on both: gone from both APIs, its group empty.
    assert b.call("DELETE", f"/connectors/{name}") == (204, None)
    for rest in (a, b):
        wait_until(lambda r=rest: r.call("GET", f"/connectors/{name}")[0] == 404, 60, "the connector gone")
        assert rest.get("/connectors") == []
    wait_until(lambda: _members(bootstrap, f"connect-{name}") == 0, 60, "the consumer group empty")
    produce(bootstrap, topic, _records(8000, 8100))
    assert _exact(warehouse, table, 8000)
    for worker in workers:
        assert worker.terminate() == 0


def test_a_misspelt_key_is_told_over_rest_in_distributed_mode(bootstrap: str, warehouse: Warehouse,
                                                               tmp_path: Path) -> None:
    """The validate answer lists warnings beside Connect's errors, and a create answers with them; the
    connector (created stopped) is not run, so no JVM is needed."""
    port = free_port()
    cluster = {"group.id": unique("cluster"), "config.storage.topic": unique("configs"),
               "status.storage.topic": unique("statuses"), "offset.storage.topic": unique("offsets"),
               "config.storage.replication.factor": 1, "status.storage.replication.factor": 1}
    worker = DaemonProcess(tmp_path, worker_props(bootstrap, listeners=f"http://127.0.0.1:{port}", **cluster), [],
                           mode="distributed").start()
    rest = Rest(port)
    wait_until(lambda: rest.status_of("/connectors") == 200, 120, "the worker listening", worker)
    name = unique("typo")
    config = {"name": name, "connector.class": SINK, "topics": unique("typo"), "iceberg.tables": "db.t",
              "errors.tolerence": "all", "transforms": "x", "transforms.x.type": "RegexRouter",
              "transforms.x.regex": ".*", "transforms.x.replacment": "y", "transforms.x.replacement": "z",
              **warehouse.connector_props()}
    status, infos = rest.call("PUT", "/connector-plugins/IcebergSinkConnector/config/validate", config)
    assert status == 200 and infos["error_count"] == 0
    assert "unknown key 'errors.tolerence' ignored; did you mean 'errors.tolerance'?" in infos["warnings"]
    assert any("transforms.x.replacment" in w and "did you mean 'transforms.x.replacement'?" in w
               for w in infos["warnings"])
    status, created = rest.call("POST", "/connectors", {"name": name, "config": config, "initial_state": "STOPPED"})
    assert status == 201 and any("did you mean 'errors.tolerance'?" in w for w in created["warnings"])
    status, refused = rest.call("PUT", "/connector-plugins/IcebergSinkConnector/config/validate",
                                {**config, "topics": "orders", "errors.deadletterqueue.topic.name": "orders"})
    assert refused["error_count"] == 1 and refused["warnings"]
    assert worker.terminate() == 0
