"""Operations: metrics while the sink runs, a real Prometheus scraping it, dashboards and deploy files."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tabletopic.demo.broker import free_port
from tests.support import (
    ROOT,
    DaemonProcess,
    Rest,
    Warehouse,
    connector_props,
    create_topic,
    produce,
    scrape,
    unique,
    values,
    wait_until,
    worker_props,
)


def _records(start: int, stop: int) -> list[tuple[bytes, bytes, int]]:
    return [(str(i).encode(), json.dumps({"id": i, "payload": "x" * 100}).encode(), i % 4) for i in range(start, stop)]


def dashboard_exprs() -> list[str]:
    exprs = []
    for path in (ROOT / "grafana" / "dashboards").glob("*.json"):
        for panel in json.loads(path.read_text())["panels"]:
            exprs += [t["expr"] for t in panel["targets"]]
    return exprs


def metric_names(expr: str) -> set[str]:
    names = set(re.findall(r"\b(tabletopic_[a-z0-9_]+)", expr))
    return {re.sub(r"_(bucket|sum|count)$", "", n) if n.endswith(("_bucket", "_sum", "_count")) else n for n in names}


@pytest.mark.slow
def test_metrics_prometheus_and_dashboards_during_a_run(bootstrap: str, warehouse: Warehouse, tmp_path: Path) -> None:
    topic, table = unique("ops"), "ops.events"
    create_topic(bootstrap, topic, 4)
    port = free_port()
    connector = connector_props("ops", topic, table, warehouse, {
        "value.converter.schemas.enable": "false", "iceberg.tables.auto-create-enabled": "true",
        "iceberg.control.commit.interval-ms": "2000"})
    daemon = DaemonProcess(tmp_path, worker_props(bootstrap, listeners=f"http://127.0.0.1:{port}"), [connector])
    daemon.start()
    prometheus = _start_prometheus(tmp_path, port)
    try:
        wait_until(lambda: _ready(port), 120, "/ready", daemon)
        # A burst produced while the connector is paused: it stays in its group and takes nothing, so
        # the lag must show (by construction, not by outrunning the sink), then drain to 0 once resumed.
        # First a few records, so every partition has a position to count the lag from.
        produce(bootstrap, topic, _records(200_000, 200_100))
        wait_until(lambda: sum(values(scrape(port)[1], "tabletopic_records_written_total", table=table)) >= 100,
                   120, "the first records written", daemon)
        rest, path = Rest(port), f"/connectors/{connector['name']}"
        assert rest.call("PUT", f"{path}/pause")[0] == 202
        wait_until(lambda: rest.get(f"{path}/status")["connector"]["state"] == "PAUSED", 60, "PAUSED", daemon)
        produce(bootstrap, topic, _records(0, 120_000))
        wait_until(lambda: sum(values(scrape(port)[1], "tabletopic_consumer_lag_records")) > 0, 60,
                   "the lag to show while paused", daemon)
        assert rest.call("PUT", f"{path}/resume")[0] == 202
        wait_until(lambda: sum(values(scrape(port)[1], "tabletopic_records_written_total", table=table)) >= 120_100,
                   240, "the burst written", daemon)
        wait_until(lambda: all(v == 0 for v in values(scrape(port)[1], "tabletopic_consumer_lag_records")),
                   30, "lag back to 0", daemon)
        assert len(values(scrape(port)[1], "tabletopic_consumer_lag_records")) == 4

        # Freshness grows while nothing is committed and drops when a commit lands.
        first = values(scrape(port)[1], "tabletopic_data_freshness_seconds", table=table)[0]
        time.sleep(4)
        grown = values(scrape(port)[1], "tabletopic_data_freshness_seconds", table=table)[0]
        assert grown >= first + 3
        produce(bootstrap, topic, _records(120_000, 120_100))
        wait_until(lambda: values(scrape(port)[1], "tabletopic_data_freshness_seconds", table=table)[0] < grown - 2,
                   60, "freshness to drop after a commit", daemon)

        text, samples = scrape(port)
        commits = values(samples, "tabletopic_commits_total", table=table)[0]
        assert values(samples, "tabletopic_commit_latency_seconds_count", table=table) == [commits]
        snapshots = warehouse.snapshots(table)
        assert commits == len(snapshots)  # one snapshot per commit, none from anywhere else
        assert values(samples, "tabletopic_process_resident_memory_bytes")[0] > 0
        assert values(samples, "tabletopic_jvm_memory_bytes", area="used")[0] > 0

        # Every metric the dashboards use is exported by the running daemon.
        exported = {f.name for f in text_string_to_metric_families(text)}
        exported |= {n + "_total" for n in exported}
        used = set().union(*(metric_names(e) for e in dashboard_exprs()))
        assert used and used <= exported, used - exported

        # A real Prometheus server scraped it.
        if prometheus is not None:
            prom_port = prometheus[1]
            wait_until(lambda: _prom_query(prom_port, "tabletopic_commits_total") > 0, 60, "Prometheus to scrape")
    finally:
        if prometheus is not None:
            prometheus[0].terminate()
            prometheus[0].wait(timeout=30)
        if daemon.alive():
            assert daemon.terminate() == 0


def _ready(port: int) -> bool:
    try:
        return urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=2).status == 200
    except OSError:
        return False


def _prometheus_binary() -> str | None:
    binary = shutil.which("prometheus")
    if binary is None and os.environ.get("CI"):
        raise AssertionError("CI must have Debian's prometheus package: .ci/run installs it")
    return binary


def _start_prometheus(tmp_path: Path, target_port: int,
                      rules: Path | None = None) -> tuple[subprocess.Popen[bytes], int] | None:
    binary = _prometheus_binary()
    if binary is None:
        return None
    port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        **({"rule_files": [str(rules)]} if rules is not None else {}),
        "scrape_configs": [{"job_name": "tabletopic", "static_configs": [{"targets": [f"127.0.0.1:{target_port}"]}]}]}))
    proc = subprocess.Popen([binary, f"--config.file={config}", f"--web.listen-address=127.0.0.1:{port}",
                             f"--storage.tsdb.path={tmp_path / 'tsdb'}"],
                            stdout=subprocess.DEVNULL, stderr=(tmp_path / "prometheus.log").open("wb"))
    return proc, port


def _prom_query(port: int, query: str) -> float:
    try:
        url = f"http://127.0.0.1:{port}/api/v1/query?query={query}"
        result = json.loads(urllib.request.urlopen(url, timeout=5).read())["data"]["result"]
    except OSError:
        return 0.0
    return sum(float(r["value"][1]) for r in result)


ALERTS = ROOT / "deploy" / "prometheus" / "tabletopic-alerts.yml"


def test_alert_rules_check_and_use_exported_metrics() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        if os.environ.get("CI"):
            raise AssertionError("CI must have promtool (Debian's prometheus package)")
        pytest.skip("promtool is not installed here")
    proc = subprocess.run([promtool, "check", "rules", str(ALERTS)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rules = [r for g in yaml.safe_load(ALERTS.read_text())["groups"] for r in g["rules"]]
    names = {r["alert"] for r in rules}
    assert {"TabletopicDataStale", "TabletopicCommitFailures", "TabletopicDeadLetterRate", "TabletopicNotReady",
            "TabletopicLagGrowing", "TabletopicConnectorFailed"} <= names
    assert all(r["annotations"].get("summary") and r["annotations"].get("description") for r in rules)


@pytest.mark.slow
def test_an_alert_fires_in_a_real_prometheus(bootstrap: str, tmp_path: Path) -> None:
    """A connector whose catalog cannot be reached is FAILED; Prometheus, with the shipped rules, fires
    TabletopicConnectorFailed. The rules' ``for`` durations are cut to nothing, all else as shipped."""
    if _prometheus_binary() is None:
        pytest.skip("prometheus is not installed here")
    doc = yaml.safe_load(ALERTS.read_text())
    for group in doc["groups"]:
        for rule in group["rules"]:
            rule["for"] = "0s"
    rules = tmp_path / "alerts.yml"
    rules.write_text(yaml.safe_dump(doc))
    port = free_port()
    name = unique("alerting")
    connector = {"name": name, "topics": unique("t"), "iceberg.tables": "ops.nowhere",
                 "iceberg.catalog.type": "hadoop", "iceberg.catalog.warehouse": "hdfs://127.0.0.1:1/warehouse",
                 "iceberg.hadoop.ipc.client.connect.max.retries": "0"}
    daemon = DaemonProcess(tmp_path, worker_props(bootstrap, listeners=f"http://127.0.0.1:{port}"),
                           [connector]).start()
    prometheus = _start_prometheus(tmp_path, port, rules)
    assert prometheus is not None
    try:
        def firing() -> list[dict[str, Any]]:
            try:
                url = f"http://127.0.0.1:{prometheus[1]}/api/v1/alerts"
                alerts = json.loads(urllib.request.urlopen(url, timeout=5).read())["data"]["alerts"]
            except OSError:
                return []
            return [a for a in alerts if a["state"] == "firing"]
        wait_until(lambda: any(a["labels"]["alertname"] == "TabletopicConnectorFailed" for a in firing()), 120,
                   "TabletopicConnectorFailed to fire", daemon)
        alert = next(a for a in firing() if a["labels"]["alertname"] == "TabletopicConnectorFailed")
        assert alert["labels"]["connector"] == name and alert["labels"]["severity"] == "critical"
        assert f"connector {name} FAILED" in alert["annotations"]["summary"]
    finally:
        prometheus[0].terminate()
        prometheus[0].wait(timeout=30)
        if daemon.alive():
            daemon.terminate()


def test_dashboard_expressions_parse() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        if os.environ.get("CI"):
            raise AssertionError("CI must have promtool (Debian's prometheus package)")
        pytest.skip("promtool is not installed here")
    exprs = dashboard_exprs()
    assert len(exprs) >= 10
    rules = {"groups": [{"name": "dashboards", "rules": [
        {"record": f"check:expr_{i}", "expr": e.replace("$connector", ".*").replace("$table", ".*")}
        for i, e in enumerate(exprs)]}]}
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"dashboard-rules-{os.getpid()}.yml"
    path.write_text(yaml.safe_dump(rules))
    proc = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True)
    path.unlink()
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_dashboards_have_connector_and_table_variables() -> None:
    for path in (ROOT / "grafana" / "dashboards").glob("*.json"):
        names = {v["name"] for v in json.loads(path.read_text())["templating"]["list"]}
        assert {"connector", "table"} <= names
    provisioning = [yaml.safe_load(p.read_text()) for p in (ROOT / "grafana" / "provisioning").rglob("*.yaml")]
    assert any("datasources" in p for p in provisioning) and any("providers" in p for p in provisioning)


def test_systemd_unit_verifies(tmp_path: Path) -> None:
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not on this machine")
    unit = (ROOT / "deploy" / "systemd" / "tabletopic.service").read_text()
    exec_start = re.search(r"^ExecStart=(\S+)", unit, re.M).group(1)  # type: ignore[union-attr]
    # The console script sits next to the interpreter running the tests; CI does not put the venv on PATH.
    here = str(Path(sys.executable).parent / "tabletopic")
    assert Path(here).is_file(), here
    copy = tmp_path / "tabletopic.service"
    copy.write_text(unit.replace(exec_start, here))
    proc = subprocess.run(["systemd-analyze", "verify", str(copy)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "Restart=on-failure" in unit and "NoNewPrivileges=yes" in unit and "ProtectSystem=strict" in unit
    assert "RestartPreventExitStatus=78" in unit  # a refused configuration does not restart-loop
    stop = int(re.search(r"^TimeoutStopSec=(\d+)s", unit, re.M).group(1))  # type: ignore[union-attr]
    assert stop * 1000 > 60_000  # longer than task.shutdown.graceful.timeout.ms's default


def test_compose_and_kubernetes_files_match_the_project() -> None:
    compose = yaml.safe_load((ROOT / "deploy" / "docker" / "docker-compose.yml").read_text())
    sink = compose["services"]["sink"]
    assert sink["image"] == "tabletopic:0.1.0" and "127.0.0.1:8083:8083" in sink["ports"]
    assert (ROOT / "deploy" / "docker" / sink["build"]["context"] / sink["build"]["dockerfile"]).resolve().exists()
    for mount in sink["volumes"]:
        source = mount.split(":")[0]
        if source.startswith("."):
            assert (ROOT / "deploy" / "docker" / source).resolve().exists(), mount
    dockerfile = (ROOT / "deploy" / "docker" / "Dockerfile").read_text()
    assert "EXPOSE 8083" in dockerfile and "USER 10001" in dockerfile and "openjdk-17-jre-headless" in dockerfile
    docs = [d for p in (ROOT / "deploy" / "kubernetes").glob("*.yaml") for d in yaml.safe_load_all(p.read_text())]
    kinds = {d["kind"]: d for d in docs}
    assert {"Deployment", "ConfigMap", "Service", "ServiceMonitor", "Secret", "PersistentVolumeClaim"} <= set(kinds)
    volumes = kinds["Deployment"]["spec"]["template"]["spec"]["volumes"]
    assert not [v for v in volumes if "emptyDir" in v]  # a rollout must never empty the warehouse
    state = next(v for v in volumes if v["name"] == "state")
    assert state["persistentVolumeClaim"]["claimName"] == kinds["PersistentVolumeClaim"]["metadata"]["name"]
    secrets = {v["name"]: v for v in kinds["Deployment"]["spec"]["template"]["spec"]["volumes"] if "secret" in v}
    assert secrets["kafka-secrets"]["secret"]["secretName"] == kinds["Secret"]["metadata"]["name"]
    container = kinds["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "tabletopic:0.1.0"
    assert container["ports"][0]["containerPort"] == 8083
    assert container["readinessProbe"]["httpGet"]["path"] == "/ready"
    config = kinds["ConfigMap"]["data"]
    assert "listeners=http://0.0.0.0:8083" in config["worker.properties"]
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert "/etc/tabletopic/worker.properties" in mounts and container["args"][0] in mounts
    assert kinds["Deployment"]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > 60
    # The example configuration files are valid.
    from tabletopic.config.connector import parse_connector
    from tabletopic.config.files import load_config_file
    from tabletopic.config.worker import parse_worker
    from tabletopic.core.java_properties import parse_properties
    worker = parse_worker(load_config_file(ROOT / "deploy" / "config" / "worker.properties"))
    parse_connector(load_config_file(ROOT / "deploy" / "config" / "clickstream.properties"), worker)
    parse_connector(parse_properties(config["clickstream.properties"]), parse_worker(
        parse_properties(config["worker.properties"])))


def test_sigterm_during_commits_exits_0_inside_the_stop_timeout(bootstrap: str, warehouse: Warehouse,
                                                                 tmp_path: Path) -> None:
    topic, table = unique("stop"), "ops.stop"
    create_topic(bootstrap, topic, 4)
    connector = connector_props("stop", topic, table, warehouse, {
        "value.converter.schemas.enable": "false", "iceberg.tables.auto-create-enabled": "true",
        "iceberg.control.commit.interval-ms": "500"})
    daemon = DaemonProcess(tmp_path, worker_props(bootstrap), [connector]).start()
    wait_until(lambda: '"partitions assigned"' in daemon.output(), 120, "assignment", daemon)
    produce(bootstrap, topic, _records(0, 60_000))
    group = f"connect-{connector['name']}"
    # Rounds run back to back while the backlog drains: signal as soon as the first one lands.
    wait_until(lambda: bool(warehouse.offsets(table, group)), 120, "a first commit", daemon, every=0.1)
    unit = (ROOT / "deploy" / "systemd" / "tabletopic.service").read_text()
    stop_timeout = int(re.search(r"^TimeoutStopSec=(\d+)s", unit, re.M).group(1))  # type: ignore[union-attr]
    started = time.monotonic()
    code = daemon.terminate(timeout=stop_timeout)
    assert code == 0, daemon.output()[-3000:]
    assert time.monotonic() - started < stop_timeout
    offsets: dict[Any, int] = warehouse.offsets(table, group)
    rows = warehouse.sql(f"SELECT count(*), count(DISTINCT id) FROM {{c}}.{table}")[0]
    assert rows[0] == rows[1] == sum(offsets.values())  # what is committed is whole and has no duplicates
