"""One place decides what a secret is; shown values keep placeholders and hide the rest."""

from __future__ import annotations

import pytest

from tabletopic.observe.secrets import HIDDEN, Scrubber, is_secret, redact


@pytest.mark.parametrize("key", ["ssl.truststore.password", "sasl.jaas.config", "basic.auth.user.info",
                                 "value.converter.basic.auth.user.info", "iceberg.catalog.credential",
                                 "iceberg.catalog.token", "iceberg.catalog.s3.secret-access-key",
                                 "consumer.override.sasl.jaas.config", "iceberg.catalog.client.secret"])
def test_password_keys_are_secrets(key: str) -> None:
    assert is_secret(key)


@pytest.mark.parametrize("key", ["topics", "iceberg.catalog.uri", "sasl.mechanism", "ssl.truststore.location"])
def test_other_keys_are_not(key: str) -> None:
    assert not is_secret(key)


def test_placeholders_are_shown_as_written_and_inline_secrets_hidden() -> None:
    shown = redact({"sasl.jaas.config": "${file:/etc/k.properties:jaas}", "ssl.keystore.password": "hunter22",
                    "schema.registry.url": "https://bob:pw123456@registry:8081", "topics": "a,b"})
    assert shown == {"sasl.jaas.config": "${file:/etc/k.properties:jaas}", "ssl.keystore.password": HIDDEN,
                     "schema.registry.url": f"https://{HIDDEN}@registry:8081", "topics": "a,b"}


def test_the_scrubber_hides_resolved_values_wherever_they_appear() -> None:
    scrubber = Scrubber()
    scrubber.learn({"sasl.jaas.config": 'x required username="alice" password="alice-secret";',
                    "ssl.keystore.password": "changeit-7", "topics": "orders"})
    line = "login as alice with alice-secret failed; keystore changeit-7; topic orders"
    assert scrubber.scrub(line) == f"login as alice with {HIDDEN} failed; keystore {HIDDEN}; topic orders"
    event = scrubber(None, "error", {"event": "boom", "error": "changeit-7", "nested": {"a": ["alice-secret"]}})
    assert event == {"event": "boom", "error": HIDDEN, "nested": {"a": [HIDDEN]}}
