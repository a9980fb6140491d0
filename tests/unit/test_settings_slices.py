"""Each part of a connector gets the slice of its configuration it reads, and neither a slice nor a whole
configuration tells a secret in its repr: either may end up in a log line or an error message."""

from __future__ import annotations

import pytest

from tabletopic.config.connector import ConnectorConfig, parse_connector
from tabletopic.config.worker import WorkerConfig, parse_worker
from tabletopic.consume.faust_app import ConsumerSettings
from tabletopic.ops.table_offsets import RecordingTables
from tabletopic.route.router import RoutingSettings
from tabletopic.stage.failed_records import ErrorSettings
from tabletopic.stage.staging import StagingSettings
from tabletopic.task.sink_task import TaskSettings
from tabletopic.write.iceberg_tables import TablesSettings
from tabletopic.write.table_creation import CreationSettings

SECRETS = ("s3-secret-7f3a", "oauth-secret-91c2", "sasl-password-55e0", "registry-secret-3d8e")


def _worker() -> WorkerConfig:
    return parse_worker({"bootstrap.servers": "127.0.0.1:9", "sasl.mechanism": "SCRAM-SHA-256",
                         "security.protocol": "SASL_PLAINTEXT",
                         "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
                                             f'username="w" password="{SECRETS[2]}";',
                         "value.converter": "org.apache.kafka.connect.json.JsonConverter"})


def _config() -> ConnectorConfig:
    return parse_connector({
        "name": "orders", "topics": "orders", "iceberg.tables": "db.orders",
        "iceberg.tables.default-id-columns": "id", "iceberg.tables.upsert-mode-enabled": "true",
        "iceberg.catalog.type": "rest", "iceberg.catalog.uri": "http://127.0.0.1:9/",
        "iceberg.catalog.warehouse": "s3://lake/", "iceberg.catalog.s3.secret-access-key": SECRETS[0],
        "iceberg.catalog.credential": f"client:{SECRETS[1]}",
        "value.converter": "io.confluent.connect.avro.AvroConverter",
        "value.converter.schema.registry.url": "http://127.0.0.1:9/",
        "value.converter.basic.auth.credentials.source": "USER_INFO",
        "value.converter.basic.auth.user.info": f"sink:{SECRETS[3]}",
        "consumer.override.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
                                              f'username="u" password="{SECRETS[2]}";',
    }, _worker())


@pytest.mark.parametrize("slice_of", [
    StagingSettings.of, TablesSettings.of, CreationSettings.of, RoutingSettings.of, TaskSettings.of,
    ErrorSettings.of, lambda config: ConsumerSettings.of(config, _worker()), lambda config: config,
    lambda config: config.catalog, lambda config: _worker(), RecordingTables.of,
], ids=["staging", "tables", "creation", "routing", "task", "errors", "consumer", "connector", "catalog", "worker",
        "recording-tables"])
def test_no_configuration_tells_a_secret_in_its_repr(slice_of: object) -> None:
    config = _config()
    assert config.catalog_props["s3.secret-access-key"] == SECRETS[0]  # the secrets are there to be told
    assert SECRETS[2] in config.consumer_overrides["sasl.jaas.config"]
    assert SECRETS[2] in _worker().raw["sasl.jaas.config"]
    shown = repr(slice_of(config))  # type: ignore[operator]
    assert [s for s in SECRETS if s in shown] == []


def test_the_tables_slice_still_hands_the_catalog_its_secrets() -> None:
    settings = TablesSettings.of(_config())
    assert settings.catalog_props["s3.secret-access-key"] == SECRETS[0]
    assert settings.table("db.orders").id_columns == ["id"] and settings.creation.table("db.orders").keyed
