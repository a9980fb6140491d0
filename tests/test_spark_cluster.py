"""`spark.master` pointing at a real Spark standalone cluster: the files are written on its executors."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest

from tests.support import (
    DaemonProcess,
    Warehouse,
    connector_props,
    create_topic,
    produce,
    unique,
    wait_until,
    worker_props,
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _StandaloneCluster:
    """A master and one worker started from pyspark's own `spark-class`, on loopback."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = _free_port()
        self.work_dir = root / "work"
        self.work_dir.mkdir(parents=True)
        home = Path(pyspark.__file__).parent
        self._spark_class = str(home / "bin" / "spark-class")
        self._env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1",
                     "SPARK_LOG_DIR": str(root), "SPARK_WORKER_DIR": str(self.work_dir)}
        self.procs: list[subprocess.Popen[bytes]] = []

    @property
    def master(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _start(self, name: str, *args: str) -> None:
        with open(self.root / f"{name}.log", "wb") as log:
            self.procs.append(subprocess.Popen([self._spark_class, *args], env=self._env, stdout=log,
                                               stderr=subprocess.STDOUT, start_new_session=True))

    def start(self) -> _StandaloneCluster:
        self._start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                    "--port", str(self.port), "--webui-port", str(_free_port()))
        self._start("worker", "org.apache.spark.deploy.worker.Worker", self.master, "--host", "127.0.0.1",
                    "--cores", "1", "--memory", "1g", "--webui-port", str(_free_port()),
                    "--work-dir", str(self.work_dir))
        wait_until(lambda: "Registering worker" in (self.root / "master.log").read_text(errors="replace"), 120,
                   "the Spark worker registered with its master")
        return self

    def executor_logs(self) -> str:
        return "".join(p.read_text(errors="replace") for p in self.work_dir.glob("app-*/*/stderr"))

    def stop(self) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[_StandaloneCluster]:
    started = _StandaloneCluster(tmp_path / "spark")
    try:
        yield started.start()
    finally:
        started.stop()


@pytest.mark.slow
def test_files_are_written_on_an_external_clusters_executors(
        bootstrap: str, warehouse: Warehouse, cluster: _StandaloneCluster, tmp_path: Path) -> None:
    topic, table = unique("cluster"), "cluster.events"
    create_topic(bootstrap, topic, 2)
    connector = connector_props("cluster", topic, table, warehouse, {
        "value.converter.schemas.enable": "false", "iceberg.tables.auto-create-enabled": "true",
        "iceberg.control.commit.interval-ms": "1000"})
    worker = worker_props(bootstrap, **{"spark.master": cluster.master, "spark.driver.host": "127.0.0.1",
                                        "spark.driver.bindAddress": "127.0.0.1", "spark.executor.memory": "512m",
                                        "spark.cores.max": "1"})
    (tmp_path / "d").mkdir()
    daemon = DaemonProcess(tmp_path / "d", worker, [connector]).start()
    produce(bootstrap, topic, [(None, json.dumps({"id": i}).encode(), i % 2) for i in range(3000)])
    group = f"connect-{connector['name']}"
    wait_until(lambda: sum(warehouse.offsets(table, group).values()) == 3000, 240, "every record committed", daemon)
    assert daemon.terminate() == 0, daemon.output()[-3000:]

    assert sorted(r.id for r in warehouse.rows(table, "id")) == list(range(3000))
    assert f"\"master\": \"{cluster.master}\"" in daemon.output()
    # The writer's tasks ran in the cluster's executor, not in the daemon's driver.
    assert "Finished task" in cluster.executor_logs(), cluster.executor_logs()[-3000:]
