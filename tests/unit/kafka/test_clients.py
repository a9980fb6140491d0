"""Every client's settings: precedence, TLS stores, JAAS, and errors that say what to fix."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from tabletopic.kafka.clients import KafkaClients, security_of, security_problem
from tests.tls_material import PASSWORD, Material, make_material


@pytest.fixture(scope="module")
def material(tmp_path_factory: pytest.TempPathFactory) -> Material:
    """Read only: one set for the module (its JKS stores cost two JVM starts)."""
    return make_material(tmp_path_factory.mktemp("tls"))


JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="a\\"b c";'


def test_worker_keys_then_role_prefixes_then_connector_overrides() -> None:
    worker = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": JAAS,
              "producer.sasl.mechanism": "SCRAM-SHA-256", "consumer.max.poll.records": "5"}
    clients = KafkaClients(["b:9092"], worker).for_connector(
        {"sasl.jaas.config": JAAS.replace("alice", "carol")}, {})
    assert clients.security("admin").mechanism == "SCRAM-SHA-512"
    assert clients.security("producer").mechanism == "SCRAM-SHA-256"
    consumer = clients.security("consumer")
    assert (consumer.username, consumer.password) == ("carol", 'a"b c')
    assert "max.poll.records" not in clients.props("consumer")
    assert "a\"b c" not in repr(consumer) and "a\"b c" not in clients.describe("consumer")


def test_pem_pkcs12_and_jks_stores_make_the_same_context(material: Material) -> None:
    m = material
    for trust, keystore in ((m.path("ca.pem"), m.path("client-keystore.pem")),
                            (m.path("truststore.p12"), m.path("client.p12")),
                            (m.path("truststore.jks"), m.path("client.jks"))):
        s = security_of({"security.protocol": "SSL", "ssl.truststore.location": str(trust),
                         "ssl.truststore.password": PASSWORD, "ssl.keystore.location": str(keystore),
                         "ssl.keystore.password": PASSWORD})
        assert s.context is not None and s.client_cert and s.context.verify_mode is ssl.CERT_REQUIRED
        assert s.context.check_hostname
    assert not list(Path("/tmp").glob("tabletopic-key-*"))  # the key's PEM file is gone at once


def test_store_problems_say_what_to_do(material: Material, tmp_path: Path) -> None:
    m = material
    jks = tmp_path / "damaged.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed")
    assert "keytool -importkeystore" in (security_problem({"security.protocol": "SSL",
                                                           "ssl.truststore.location": str(jks)}) or "")
    wrong_jks = security_problem({"security.protocol": "SSL", "ssl.keystore.location": str(m.path("client.jks")),
                                  "ssl.keystore.password": "nope-nope"})
    assert wrong_jks is not None and "check ssl.keystore.password" in wrong_jks
    wrong = security_problem({"security.protocol": "SSL", "ssl.keystore.location": str(m.path("client.p12")),
                              "ssl.keystore.password": "nope-nope"})
    assert wrong is not None and "check ssl.keystore.password" in wrong and "nope-nope" not in wrong
    missing = security_problem({"security.protocol": "SSL", "ssl.truststore.location": str(tmp_path / "none.pem")})
    assert missing is not None and "cannot be read" in missing


def test_hostname_checks_follow_the_endpoint_identification_key(material: Material) -> None:
    m = material
    s = security_of({"security.protocol": "SSL", "ssl.truststore.location": str(m.path("ca.pem")),
                     "ssl.endpoint.identification.algorithm": ""})
    assert s.context is not None and not s.context.check_hostname


@pytest.mark.parametrize("jaas", ["", "nonsense", 'org.x.ScramLoginModule required username="u";'])
def test_a_jaas_line_without_a_login_is_refused(jaas: str) -> None:
    why = security_problem({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.jaas.config": jaas})
    assert why is not None and "sasl.jaas.config" in why


def test_oauthbearer_takes_client_credentials_from_the_jaas_line() -> None:
    jaas = ('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="sink" '
            'clientSecret="cs-1" scope="kafka";')
    s = security_of({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config": jaas,
                     "sasl.oauthbearer.token.endpoint.url": "https://idp/token"})
    assert s.token is not None and s.token.client_id == "sink" and "cs-1" not in repr(s)
    assert s.aiokafka()["sasl_oauth_token_provider"] is s.token
    missing = security_problem({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
                                "sasl.jaas.config": jaas})
    assert missing is not None and "sasl.oauthbearer.token.endpoint.url" in missing
