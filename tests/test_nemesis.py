"""The network between the daemon and Kafka fails, over and over, under live traffic: connections reset
and refused, traffic blackholed with sockets open, seconds of latency, and a SIGKILL among them.

Every Kafka client goes through a fault proxy (tests/fault_proxy.py) that the broker advertises. The
producer goes through it too, so it may fail sends or write a record twice: what each table must hold
is read back from the topic's own log once the network heals. An append table holds every record of
its topic once; an upsert table holds the last value of every key. The daemon's warnings and errors
during the faults stay bounded by the number of faults, not their length.
"""

from __future__ import annotations

import collections
import json
import logging
import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tabletopic.demo.broker import EmbeddedBroker, free_port
from tabletopic.demo.lake_servers import MotoLake
from tabletopic.write.spark_session import SparkRuntime
from tests.fault_proxy import FaultProxy
from tests.nemesis_traffic import KEYS, PARTITIONS, Traffic, fold, read_log
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

LINES_PER_FAULT = 20  # warnings and errors the daemon may log for one fault (a broker down logged thousands)


@pytest.fixture
def proxy(tmp_path: Path) -> Iterator[FaultProxy]:
    """A broker of its own, which sends every client to the proxy in front of it."""
    port = free_port()
    proxy = FaultProxy(port).start()
    # The test's own producer and readers go through the faults too; their complaints are not the daemon's.
    quiet = logging.getLogger("aiokafka")
    level, quiet.level = quiet.level, logging.CRITICAL
    with EmbeddedBroker(port=port, advertised_port=proxy.port, log_path=tmp_path / "tansu.log"):
        yield proxy
    proxy.stop()
    quiet.setLevel(level)


@pytest.mark.timeout(600)
@pytest.mark.slow
def test_kafka_network_faults_lose_and_duplicate_nothing_and_log_a_few_lines_each(
        proxy: FaultProxy, warehouse: Warehouse, tmp_path: Path) -> None:
    bootstrap = f"127.0.0.1:{proxy.port}"
    events, accounts = unique("nemesis_events"), unique("nemesis_accounts")
    for topic in (events, accounts):
        create_topic(bootstrap, topic, PARTITIONS)
    common = {"value.converter.schemas.enable": "false", "iceberg.tables.auto-create-enabled": "true",
              "iceberg.control.commit.interval-ms": "1500"}
    append = connector_props("nemesis_append", events, "nemesis.events", warehouse, common)
    upsert = connector_props("nemesis_upsert", accounts, "nemesis.accounts", warehouse, {
        **common, "iceberg.tables.default-id-columns": "id", "iceberg.tables.upsert-mode-enabled": "true"})
    daemon = DaemonProcess(tmp_path, worker_props(bootstrap), [append, upsert]).start()
    traffic = Traffic(bootstrap, events, accounts).start()
    wait_until(lambda: warehouse.exists("nemesis.events") and warehouse.exists("nemesis.accounts"), 180,
               "both tables created", daemon)

    rng = random.Random(55)
    faults = [lambda: proxy.reset(rng.uniform(3, 5)), lambda: proxy.blackhole(rng.uniform(3, 5)),
              lambda: proxy.latency(rng.uniform(4, 6), rng.uniform(0.2, 0.5))]
    for round_number in range(6):
        faults[round_number % 3]()
        if round_number == 3:
            daemon.kill()  # a process fault among the network's
            daemon.start()
        time.sleep(rng.uniform(6, 9))  # heal, then traffic flows until the next fault
    traffic.stop()

    logged = read_log(bootstrap, events)
    changes = read_log(bootstrap, accounts)
    last = fold(changes)

    def caught_up() -> bool:
        if warehouse.rows("nemesis.events", "count(*)")[0][0] != len(logged):
            return False
        return {r[0]: r[1] for r in warehouse.rows("nemesis.accounts", "id, v")} == last
    wait_until(caught_up, 240, "both tables equal to their topics' logs", daemon)

    rows = collections.Counter(r[0] for r in warehouse.rows("nemesis.events", "seq"))
    assert rows == collections.Counter(r["seq"] for r in logged)  # every record of the log once, and nothing else
    assert len(warehouse.rows("nemesis.accounts", "id")) == len(last)
    for table in ("nemesis.events", "nemesis.accounts"):
        warehouse.assert_intact(table)
    assert daemon.alive()
    assert proxy.cut > 0, "the faults never met the daemon's Kafka connections"

    _quiet_enough(daemon, proxy, f"{len(logged)} appended, {len(changes)} changes of {len(last)} keys; "
                                 f"sends that failed: {traffic.failed_sends}")


@pytest.mark.timeout(600)
@pytest.mark.slow
def test_s3_faults_lose_and_duplicate_nothing_and_leave_every_file_in_place(
        bootstrap: str, spark: SparkRuntime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """S3 answers 503 SlowDown to half the requests, resets its connections, stops answering with
    sockets open; the daemon is SIGKILLed among the faults. The catalog (Glue) is not behind the proxy."""
    with MotoLake(log_path=tmp_path / "moto.log") as moto:
        for key, value in moto.glue_environment().items():  # the integrity check reads S3 through boto3
            monkeypatch.setenv(key, value)
        proxy = FaultProxy(moto.s3_port).start()
        try:
            _s3_faults(moto, proxy, bootstrap, spark, tmp_path)
        finally:
            proxy.stop()


def _s3_faults(moto: MotoLake, proxy: FaultProxy, bootstrap: str, spark: SparkRuntime, tmp_path: Path) -> None:
    env = moto.glue_environment()
    system = spark.jvm.java.lang.System  # the test's own reads of Glue take the keys as system properties
    for key, prop in (("AWS_ACCESS_KEY_ID", "aws.accessKeyId"), ("AWS_SECRET_ACCESS_KEY", "aws.secretAccessKey"),
                      ("AWS_REGION", "aws.region")):
        system.setProperty(prop, env[key])
    direct = moto.glue_props()
    proxied = {**direct, "s3.endpoint": f"http://127.0.0.1:{proxy.port}"}
    catalog, namespace = unique("s3faults"), unique("ns").replace("-", "_")
    events, accounts = unique("s3_events"), unique("s3_accounts")
    for topic in (events, accounts):
        create_topic(bootstrap, topic, PARTITIONS)
    common = {"iceberg.catalog": catalog, **{f"iceberg.catalog.{k}": v for k, v in proxied.items()},
              "iceberg.tables.auto-create-enabled": "true", "iceberg.control.commit.interval-ms": "1500",
              "value.converter.schemas.enable": "false"}
    connectors = [
        {"name": unique("s3-append"), "topics": events, "iceberg.tables": f"{namespace}.events", **common},
        {"name": unique("s3-upsert"), "topics": accounts, "iceberg.tables": f"{namespace}.accounts",
         "iceberg.tables.default-id-columns": "id", "iceberg.tables.upsert-mode-enabled": "true", **common}]
    reader = Warehouse(spark, tmp_path, direct, name=catalog)
    daemon = DaemonProcess(tmp_path, worker_props(bootstrap), connectors, env=env).start()
    rng = random.Random(56)
    appended: list[int] = []
    last: dict[int, int] = {}

    def wave(n: int) -> None:
        ids = list(range(len(appended), len(appended) + n))
        appended.extend(ids)
        produce(bootstrap, events, [(None, json.dumps({"seq": i}).encode(), i % PARTITIONS) for i in ids])
        changes = [(rng.randrange(KEYS), i) for i in ids[: n // 2]]
        last.update(changes)
        produce(bootstrap, accounts, [(str(k).encode(), json.dumps({"id": k, "v": v}).encode(), k % PARTITIONS)
                                      for k, v in changes])

    wave(2000)
    wait_until(lambda: reader.exists(f"{namespace}.events") and reader.exists(f"{namespace}.accounts"), 180,
               "both tables created", daemon)
    faults = [lambda: proxy.http_errors(rng.uniform(6, 9), 0.5), lambda: proxy.reset(rng.uniform(3, 5)),
              lambda: proxy.blackhole(rng.uniform(3, 5))]
    for round_number in range(6):
        faults[round_number % 3]()
        wave(1000)
        if round_number == 4:
            daemon.kill()
            daemon.start()
        time.sleep(rng.uniform(5, 8))

    def caught_up() -> bool:
        if reader.rows(f"{namespace}.events", "count(*)")[0][0] != len(appended):
            return False
        return {r[0]: r[1] for r in reader.rows(f"{namespace}.accounts", "id, v")} == last
    wait_until(caught_up, 300, "both tables equal to what was produced", daemon)
    assert sorted(r[0] for r in reader.rows(f"{namespace}.events", "seq")) == appended
    for table in ("events", "accounts"):
        reader.assert_intact(f"{namespace}.{table}")  # every file the head names is in S3, at its size
    assert daemon.alive()
    assert proxy.cut > 0 and proxy.answered_503 > 0, "the faults never met the daemon's S3 traffic"
    _quiet_enough(daemon, proxy, f"{len(appended)} appended, {len(appended) // 2} changes of {len(last)} keys; "
                                 f"requests answered 503: {proxy.answered_503}")


def _quiet_enough(daemon: DaemonProcess, proxy: FaultProxy, records: str) -> None:
    """The daemon's warnings and errors are bounded by the faults, not by how long they lasted; printed by kind."""
    lines = [json.loads(line) for line in daemon.output().splitlines() if line.startswith("{")]
    loud = [line for line in lines if line.get("level") in ("warning", "error", "critical")]
    by_kind = collections.Counter((line.get("logger"), str(line.get("event"))[:60]) for line in loud)
    print(f"faults: {[(f.kind, round(f.seconds, 1)) for f in proxy.faults]} and a SIGKILL; records: {records}; "
          f"connections cut: {proxy.cut}; warnings and errors logged: {len(loud)}")
    for kind, count in by_kind.most_common(15):
        print(f"    {count:5} {kind}")
    assert len(loud) <= LINES_PER_FAULT * (len(proxy.faults) + 1), by_kind.most_common(15)
