"""The HTTP listener and the built-in Schema Registry over HTTPS with HTTP Basic authentication."""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from tabletopic.demo.broker import free_port
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
from tests.tls_material import PASSWORD, Material, make_material

REST_USER, REST_PASSWORD = "operator", "rest-Pw-5t9q"
REGISTRY_USER, REGISTRY_PASSWORD = "producer", "registry-Pw-8k2m"
SCHEMA = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}


@pytest.fixture
def material(tmp_path: Path) -> Material:
    return make_material(tmp_path / "tls")


def _get(url: str, ca: Path, login: tuple[str, str] | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url)
    if login is not None:
        request.add_header("Authorization", "Basic " + base64.b64encode(":".join(login).encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=10, context=ssl.create_default_context(cafile=str(ca))) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


@pytest.mark.slow
def test_rest_api_and_registry_answer_401_without_credentials_and_200_with_them(
        bootstrap: str, warehouse: Warehouse, material: Material, tmp_path: Path) -> None:
    rest_users, registry_users = tmp_path / "rest-users.properties", tmp_path / "registry-users.properties"
    rest_users.write_text(f"{REST_USER}: {REST_PASSWORD}\n")
    registry_users.write_text(f"{REGISTRY_USER}: {REGISTRY_PASSWORD}\n")
    rest, registry = f"https://127.0.0.1:{free_port()}", f"https://127.0.0.1:{free_port()}"
    worker = worker_props(bootstrap, **{
        "listeners": rest, "listeners.https.ssl.keystore.location": str(material.path("server.p12")),
        "listeners.https.ssl.keystore.password": PASSWORD, "rest.authentication.method": "BASIC",
        "rest.authentication.credentials.file": str(rest_users),
        "schema.registry.listeners": registry, "schema.registry.topic": unique("_schemas"),
        "schema.registry.ssl.keystore.location": str(material.path("server-keystore.pem")),
        "schema.registry.authentication.method": "BASIC",
        "schema.registry.authentication.credentials.file": str(registry_users)})
    topic, table = unique("secured_http"), "https.orders"
    create_topic(bootstrap, topic, 1)
    connector = connector_props("https", topic, table, warehouse, {
        "value.converter": "io.confluent.connect.avro.AvroConverter", "iceberg.tables.auto-create-enabled": "true",
        "iceberg.control.commit.interval-ms": "1000"})
    daemon = DaemonProcess(tmp_path, worker, [connector]).start()
    ca = material.path("ca.pem")
    wait_until(lambda: _ready(f"{rest}/health", ca), 180, "the HTTPS listener", daemon)
    # The HTTP listener is up from the first second; the registry once its topic is read.
    wait_until(lambda: _answers(f"{registry}/subjects", ca), 180, "the registry's listener", daemon)

    assert _get(f"{rest}/health", ca)[0] == 200  # open for probes
    for path in ("/connectors", f"/connectors/{connector['name']}/config", "/metrics", "/ready", "/"):
        assert _get(rest + path, ca)[0] == 401, path
        assert _get(rest + path, ca, (REST_USER, "wrong"))[0] == 401, path
    status, body = _get(f"{rest}/connectors", ca, (REST_USER, REST_PASSWORD))
    assert status == 200 and json.loads(body) == [connector["name"]]
    assert _get(f"{registry}/subjects", ca)[0] == 401

    anonymous = SchemaRegistryClient({"url": registry, "ssl.ca.location": str(ca)})
    with pytest.raises(SchemaRegistryError) as refused:
        anonymous.register_schema(f"{topic}-value", Schema(json.dumps(SCHEMA), "AVRO"))
    assert refused.value.http_status_code == 401
    client = SchemaRegistryClient({"url": registry, "ssl.ca.location": str(ca),
                                   "basic.auth.user.info": f"{REGISTRY_USER}:{REGISTRY_PASSWORD}"})
    schema_id = client.register_schema(f"{topic}-value", Schema(json.dumps(SCHEMA), "AVRO"))
    assert client.get_schema(schema_id).schema_str == json.dumps(SCHEMA)
    assert client.get_subjects() == [f"{topic}-value"]
    serialize = AvroSerializer(client, json.dumps(SCHEMA))
    # The daemon's AvroConverter reads the schema from its own authenticated HTTPS registry.
    produce(bootstrap, topic, [(None, serialize({"id": i}, SerializationContext(topic, MessageField.VALUE)), 0)
                               for i in range(100)])
    wait_until(lambda: sum(warehouse.offsets(table, f"connect-{connector['name']}").values()) == 100, 120,
               "the Avro records committed", daemon)
    assert daemon.terminate() == 0
    assert sorted(r.id for r in warehouse.rows(table, "id")) == list(range(100))
    output = daemon.output()
    assert REGISTRY_PASSWORD not in output and REST_PASSWORD not in output and PASSWORD not in output


def _ready(url: str, ca: Path) -> bool:
    try:
        return _get(url, ca)[0] == 200
    except OSError:
        return False


def _answers(url: str, ca: Path) -> bool:
    try:
        _get(url, ca)
    except OSError:
        return False
    return True
