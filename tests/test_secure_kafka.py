"""Secured Kafka end to end: SASL_SSL with SCRAM-SHA-512 or OAUTHBEARER, and mutual TLS; secrets from a provider.

No broker here authenticates by itself: each mode runs a Tansu that advertises the port of
``tests/kafka_front.py``, which checks certificates and logins before it relays a byte.
Every client of the test and of the daemon goes through the front.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tabletopic.core import exit_codes
from tabletopic.demo.broker import EmbeddedBroker, free_port
from tabletopic.kafka.clients import KafkaClients
from tests.support import DaemonProcess, Warehouse, connector_props, unique, wait_until, worker_props
from tests.tls_material import PASSWORD, Material, make_material

SCRAM_PASSWORD = "Scr4m-only-in-a-file-9d2f"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
FILE_PROVIDER = "org.apache.kafka.common.config.provider.FileConfigProvider"


class SecureKafka:
    """A Tansu behind a front on its own port, and the client settings that get through it."""

    def __init__(self, root: Path, material: Material, mode: str) -> None:
        self.material = material
        self.port = free_port()
        self.broker = EmbeddedBroker(advertised_port=self.port, log_path=root / f"tansu-{mode}.log").start()
        args = ["--listen", str(self.port), "--backend", str(self.broker.port),
                "--cert", str(material.path("server.pem")), "--key", str(material.path("server.key"))]
        self.token_port = free_port()
        if mode == "mtls":
            args += ["--ca", str(material.path("ca.pem")), "--require-cert"]
        elif mode == "oauth":
            args += ["--sasl", "OAUTHBEARER", "--user", f"alice:{SCRAM_PASSWORD}", "--token-port", str(self.token_port)]
        else:
            args += ["--sasl", "SCRAM-SHA-512", "--user", f"alice:{SCRAM_PASSWORD}"]
        self.front = subprocess.Popen([sys.executable, "-m", "tests.kafka_front", *args],
                                      cwd=Path(__file__).resolve().parent.parent, stdin=subprocess.DEVNULL)
        self.mode = mode
        self.bootstrap = f"127.0.0.1:{self.port}"
        # The test's own clients: the same keys a user writes, inline (the daemon reads them from a provider).
        self.props = self.client_props(SCRAM_PASSWORD, material.path("ca.pem"))
        wait_until(self._ready, 30, f"the {mode} front accepts logins")

    def client_props(self, password: str, trust: Path, keystore: Path | None = None) -> dict[str, str]:
        props = {"ssl.truststore.location": str(trust)}
        if self.mode == "mtls":
            props.update({"security.protocol": "SSL", "ssl.keystore.location": str(
                keystore or self.material.path("client.p12")), "ssl.keystore.password": PASSWORD})
        elif self.mode == "oauth":
            props.update({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
                          "sasl.oauthbearer.token.endpoint.url": f"https://127.0.0.1:{self.token_port}/token",
                          "sasl.jaas.config": f'{OAUTH} required clientId="alice" clientSecret="{password}" '
                                              'scope="kafka";'})
        else:
            props.update({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                          "sasl.jaas.config": f'{SCRAM} required username="alice" password="{password}";'})
        return props

    def clients(self) -> KafkaClients:
        return KafkaClients([self.bootstrap], self.props)

    def _ready(self) -> bool:
        try:
            asyncio.run(self.clients().probe(timeout_s=5))
            return True
        except Exception:
            return False

    def create_topic(self, name: str, partitions: int) -> None:
        from aiokafka.admin import NewTopic

        async def go() -> None:
            admin = self.clients().admin()
            await admin.start()
            try:
                await admin.create_topics([NewTopic(name, partitions, 1)])
            finally:
                await admin.close()
        asyncio.run(go())

    def produce(self, topic: str, records: list[tuple[bytes | None, bytes, int]]) -> None:
        async def go() -> None:
            producer = self.clients().producer(acks="all", enable_idempotence=False, linger_ms=5)
            await producer.start()
            try:
                await asyncio.gather(*[await producer.send(topic, v, key=k, partition=p) for k, v, p in records])
            finally:
                await producer.stop()
        asyncio.run(go())

    def read(self, topic: str, expected: int) -> list[bytes]:
        async def go() -> list[bytes]:
            consumer = self.clients().consumer(topic, auto_offset_reset="earliest", group_id=None)
            await consumer.start()
            out: list[bytes] = []
            try:
                for _ in range(40):
                    for records in (await consumer.getmany(timeout_ms=500)).values():
                        out.extend(r.value for r in records)
                    if len(out) >= expected:
                        break
            finally:
                await consumer.stop()
            return out
        return asyncio.run(go())

    def stop(self) -> None:
        self.front.terminate()
        self.front.wait(timeout=10)
        self.broker.stop()


@pytest.fixture(scope="module")
def material(tmp_path_factory: pytest.TempPathFactory) -> Material:
    return make_material(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module", params=["sasl_ssl", "mtls", "oauth"])
def secure(request: pytest.FixtureRequest, material: Material,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureKafka]:
    kafka = SecureKafka(tmp_path_factory.mktemp(request.param), material, request.param)
    yield kafka
    kafka.stop()


def _secrets_file(tmp_path: Path, secure: SecureKafka, password: str = SCRAM_PASSWORD) -> Path:
    path = tmp_path / "kafka-secrets.properties"
    jaas = f'{OAUTH} required clientId="alice" clientSecret="{password}";' if secure.mode == "oauth" else \
        f'{SCRAM} required username="alice" password="{password}";'
    path.write_text(f"jaas={jaas}\nkeystore.password={PASSWORD}\n")
    path.chmod(0o600)
    return path


def _worker(secure: SecureKafka, secrets: Path, trust: Path | None = None, keystore: Path | None = None,
            **extra: Any) -> dict[str, Any]:
    props = {k: v for k, v in secure.client_props("unused", trust or secure.material.path("ca.pem"),
                                                  keystore).items()}
    for key in ("sasl.jaas.config", "ssl.keystore.password"):
        if key in props:  # never inline: the daemon reads them through the file provider
            props[key] = f"${{file:{secrets}:{'jaas' if key == 'sasl.jaas.config' else 'keystore.password'}}}"
    return worker_props(secure.bootstrap, **{"config.providers": "file", "config.providers.file.class": FILE_PROVIDER,
                                             **props, **extra})


def _record(i: int) -> tuple[bytes, bytes, int]:
    return str(i).encode(), json.dumps({"id": i, "v": f"v{i}"}).encode(), i % 3


@pytest.mark.slow
def test_a_secured_cluster_end_to_end_through_a_crash(secure: SecureKafka, warehouse: Warehouse,
                                                     tmp_path: Path) -> None:
    topic, dlq, table = unique(f"sec_{secure.mode}"), unique("dlq"), f"secure.{secure.mode}"
    secure.create_topic(topic, 3)
    secure.create_topic(dlq, 1)
    secrets = _secrets_file(tmp_path, secure)
    port = free_port()
    # The connector's own consumer login, from the provider: the REST API shows it as written.
    override, entry = ("ssl.keystore.password", "keystore.password") if secure.mode == "mtls" else \
        ("sasl.jaas.config", "jaas")
    connector = connector_props("secure", topic, table, warehouse, {
        "value.converter.schemas.enable": "false", "iceberg.tables.auto-create-enabled": "true",
        "iceberg.control.commit.interval-ms": "1500", "errors.tolerance": "all",
        "errors.deadletterqueue.topic.name": dlq, f"consumer.override.{override}": f"${{file:{secrets}:{entry}}}",
        "producer.override.ssl.truststore.password": "inline-Secret-42x"})  # shown hidden
    group = f"connect-{connector['name']}"
    worker = _worker(secure, secrets, listeners=f"http://127.0.0.1:{port}")
    daemon = DaemonProcess(tmp_path, worker, [connector]).start()
    secure.produce(topic, [_record(i) for i in range(3000)])
    secure.produce(topic, [(b"bad", b"{not json", 0), (b"bad", b"\xff\xfe", 1)])
    wait_until(lambda: sum(warehouse.offsets(table, group).values()) > 0, 180, "a first commit", daemon)
    daemon.kill()
    secure.produce(topic, [_record(i) for i in range(3000, 6000)])
    daemon.start()
    wait_until(lambda: sum(warehouse.offsets(table, group).values()) == 6002, 180, "every offset committed", daemon)
    scraped = {path: urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5).read().decode()
               for path in (f"/connectors/{connector['name']}", f"/connectors/{connector['name']}/config",
                            "/metrics", "/connectors")}
    assert daemon.terminate() == 0, daemon.output()[-3000:]

    count, distinct, checksum = warehouse.sql(f"SELECT count(*), count(DISTINCT id), sum(id) FROM {{c}}.{table}")[0]
    assert (count, distinct, checksum) == (6000, 6000, 6000 * 5999 // 2)
    assert set(secure.read(dlq, 2)) == {b"\xff\xfe", b"{not json"}  # a crash may dead-letter one twice
    config = json.loads(scraped[f"/connectors/{connector['name']}/config"])
    assert config["producer.override.ssl.truststore.password"] == "[hidden]"
    assert config[f"consumer.override.{override}"] == f"${{file:{secrets}:{entry}}}"
    validate = subprocess.run([sys.executable, "-m", "tabletopic.cli", "validate", str(daemon.connector_files[0]),
                               "--worker", str(daemon.worker_file)], capture_output=True, text=True, timeout=120)
    assert validate.returncode == 0, validate.stdout + validate.stderr
    everything = "\n".join([daemon.output(), validate.stdout, validate.stderr, *scraped.values()])
    for secret in (SCRAM_PASSWORD, PASSWORD, "inline-Secret-42x"):
        assert secret not in everything


@pytest.mark.parametrize("case", ["wrong password", "untrusted CA", "no client certificate"])
def test_bad_credentials_stop_start_up_with_exit_78_and_commit_nothing(
        case: str, secure: SecureKafka, warehouse: Warehouse, tmp_path: Path) -> None:
    if (case == "no client certificate") != (secure.mode == "mtls") and case != "untrusted CA":
        pytest.skip(f"{case} is a case of the other mode")
    table = f"denied.{secure.mode}"
    trust = secure.material.path("other-ca.pem" if case == "untrusted CA" else "ca.pem")
    secrets = _secrets_file(tmp_path, secure, password="not-the-Password-1")
    worker = _worker(secure, secrets, trust=trust)
    if case == "no client certificate":
        worker = {k: v for k, v in worker.items() if not k.startswith("ssl.keystore")}
    connector = connector_props("denied", "anything", table, warehouse, {
        "iceberg.tables.auto-create-enabled": "true"})
    daemon = DaemonProcess(tmp_path, worker, [connector]).start()
    started = time.monotonic()
    code = daemon.wait(timeout=120)
    output = daemon.output()
    assert code == exit_codes.CONFIG, output[-3000:]
    assert secure.bootstrap in output and ("SSL" if secure.mode == "mtls" else "SASL_SSL") in output
    expected = {"wrong password": "refused client alice" if secure.mode == "oauth" else "refused the login",
                "untrusted CA": "is not trusted", "no client certificate": "check ssl.keystore.location"}[case]
    assert expected in output
    if secure.mode != "mtls":
        assert ("OAUTHBEARER" if secure.mode == "oauth" else "SCRAM-SHA-512") in output
    assert "not-the-Password-1" not in output and "Traceback" not in output
    assert not warehouse.exists(table)
    print(f"{case}: exited in {time.monotonic() - started:.1f}s")
