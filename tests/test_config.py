"""Configuration: one test per kind of mistake, each checking that the error names the key."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tabletopic.config.connector import parse_connector
from tabletopic.config.definition import ConfigError
from tabletopic.config.files import load_config_file
from tabletopic.config.worker import parse_worker
from tabletopic.core.java_properties import parse_properties

WORKER = parse_worker({"bootstrap.servers": "127.0.0.1:9092"})
GOOD: dict[str, Any] = {
    "name": "orders-sink",
    "connector.class": "org.apache.iceberg.connect.IcebergSinkConnector",
    "topics": "orders",
    "iceberg.tables": "db.orders",
    "iceberg.catalog.type": "hadoop",
    "iceberg.catalog.warehouse": "file:///tmp/wh",
}


def problems(**changes: Any) -> str:
    props = {**GOOD, **{k.replace("__", "."): v for k, v in changes.items()}}
    props = {k: v for k, v in props.items() if v is not None}
    with pytest.raises(ConfigError) as err:
        parse_connector(props, WORKER)
    return str(err.value)


def test_good_config_parses_with_the_connector_defaults() -> None:
    config = parse_connector(GOOD, WORKER)
    assert config.commit_interval_ms == 300_000
    assert config.commit_timeout_ms == 30_000
    assert config.catalog_name == "iceberg"
    assert config.control_topic == "control-iceberg"
    assert config.group_id == "connect-orders-sink"
    assert config.value_converter.class_name == "org.apache.kafka.connect.json.JsonConverter"
    assert config.auto_create is False and config.dynamic_enabled is False
    assert config.catalog_props == {"type": "hadoop", "warehouse": "file:///tmp/wh"}


def test_an_earlier_key_name_is_read_as_the_new_one_with_a_warning() -> None:
    config = parse_connector({**GOOD, "tabletopic.offsets.refresh-barriers": "3"}, WORKER)
    assert config.offsets_refresh_rounds == 3
    assert any("is the earlier name of tabletopic.offsets.refresh-rounds" in w for w in config.warnings)
    assert not any("unknown key" in w for w in config.warnings)
    # The new name wins where both are given.
    both = parse_connector({**GOOD, "tabletopic.offsets.refresh-barriers": "3",
                            "tabletopic.offsets.refresh-rounds": "7"}, WORKER)
    assert both.offsets_refresh_rounds == 7


def test_missing_name() -> None:
    assert "name: is required" in problems(name=None)


def test_topics_and_topics_regex_together() -> None:
    assert "topics=" in problems(**{"topics.regex": "ord.*"}) and "topics.regex" in problems(**{"topics.regex": "x"})


def test_no_topics() -> None:
    assert "topics: set exactly one of topics and topics.regex" in problems(topics=None)


def test_bad_topics_regex() -> None:
    assert "topics.regex='('" in problems(topics=None, **{"topics.regex": "("})


def test_boolean_that_is_not_a_boolean() -> None:
    message = problems(**{"iceberg.tables.auto-create-enabled": "yes"})
    assert "iceberg.tables.auto-create-enabled='yes': must be true or false" in message


def test_commit_interval_not_a_number() -> None:
    message = problems(**{"iceberg.control.commit.interval-ms": "5s"})
    assert "iceberg.control.commit.interval-ms='5s': must be a whole number" in message


def test_commit_interval_not_positive() -> None:
    assert "iceberg.control.commit.interval-ms='0': must be at least 1" in \
        problems(**{"iceberg.control.commit.interval-ms": "0"})


def test_fetch_sizes_come_from_the_connector_then_the_worker() -> None:
    config = parse_connector(GOOD, WORKER)
    assert (config.fetch_min_bytes, config.fetch_max_wait_ms) == (1 << 20, 500)
    worker = parse_worker({"bootstrap.servers": "127.0.0.1:9092", "consumer.fetch.min.bytes": "1",
                           "consumer.fetch.max.wait.ms": "250"})
    config = parse_connector(GOOD, worker)
    assert (config.fetch_min_bytes, config.fetch_max_wait_ms) == (1, 250)
    config = parse_connector({**GOOD, "consumer.override.fetch.min.bytes": "65536",
                              "consumer.override.fetch.max.wait.ms": "100"}, worker)
    assert (config.fetch_min_bytes, config.fetch_max_wait_ms) == (65536, 100)
    # iceberg.kafka.* is the control topic's, as in the Iceberg sink: the source consumer never sees it.
    config = parse_connector({**GOOD, "iceberg.kafka.fetch.max.wait.ms": "100"}, worker)
    assert config.fetch_max_wait_ms == 250


def test_a_fetch_override_that_is_not_a_count_is_refused() -> None:
    message = problems(**{"consumer.override.fetch.min.bytes": "1MB", "consumer.override.fetch.max.wait.ms": "-1"})
    assert "consumer.override.fetch.min.bytes='1MB': must be a whole number (int)" in message
    assert "consumer.override.fetch.max.wait.ms='-1': must be at least 0" in message
    assert "consumer.override.fetch.min.bytes='0': must be at least 1" in \
        problems(**{"consumer.override.fetch.min.bytes": "0"})


def test_unknown_partition_transform() -> None:
    message = problems(**{"iceberg.tables.default-partition-by": "dayz(ts)"})
    assert "iceberg.tables.default-partition-by='dayz(ts)'" in message and "unknown partition transform" in message


def test_bucket_without_width() -> None:
    message = problems(**{"iceberg.table.db.orders.partition-by": "bucket(id)"})
    assert "iceberg.table.db.orders.partition-by='bucket(id)'" in message and "positive whole number" in message


def test_bad_route_regex() -> None:
    message = problems(**{"iceberg.tables.route-field": "kind", "iceberg.table.db.orders.route-regex": "[a-"})
    assert "iceberg.table.db.orders.route-regex='[a-'" in message


def test_dynamic_without_route_field() -> None:
    message = problems(**{"iceberg.tables": None, "iceberg.tables.dynamic-enabled": "true"})
    assert "iceberg.tables.route-field: is required when iceberg.tables.dynamic-enabled=true" in message


def test_static_and_dynamic_together() -> None:
    message = problems(**{"iceberg.tables.dynamic-enabled": "true", "iceberg.tables.route-field": "t"})
    assert "iceberg.tables.dynamic-enabled=True: cannot be true while iceberg.tables lists static tables" in message


def test_no_tables() -> None:
    assert "iceberg.tables: is required" in problems(**{"iceberg.tables": None})


def test_bad_table_name() -> None:
    assert "iceberg.tables='db.or ders'" in problems(**{"iceberg.tables": "db.or ders"})


def test_unknown_converter() -> None:
    message = problems(**{"value.converter": "com.example.NoSuchConverter"})
    assert "value.converter='com.example.NoSuchConverter': unknown converter" in message
    assert "org.apache.kafka.connect.json.JsonConverter" in message  # says what is available


def test_avro_converter_without_a_registry() -> None:
    message = problems(**{"value.converter": "io.confluent.connect.avro.AvroConverter"})
    assert "value.converter.schema.registry.url" in message and "schema.registry.listeners" in message


def test_avro_converter_uses_the_built_in_registry_or_its_own_url() -> None:
    avro = {**GOOD, "value.converter": "io.confluent.connect.avro.AvroConverter"}
    built_in = parse_worker({"bootstrap.servers": "127.0.0.1:9092", "schema.registry.listeners": "http://0.0.0.0:8081"})
    assert parse_connector(avro, built_in).value_converter.props["schema.registry.url"] == "http://127.0.0.1:8081"
    own = parse_connector({**avro, "value.converter.schema.registry.url": "http://registry:8081"}, built_in)
    assert own.value_converter.props["schema.registry.url"] == "http://registry:8081"


def test_registry_listener_and_compatibility_are_checked() -> None:
    with pytest.raises(ConfigError) as err:
        parse_worker({"schema.registry.listeners": "http://127.0.0.1:0", "schema.registry.compatibility": "LAX"})
    message = str(err.value)
    assert "schema.registry.listeners" in message and "port other than 0" in message
    assert "schema.registry.compatibility='LAX'" in message and "FULL_TRANSITIVE" in message


def test_transform_without_type() -> None:
    assert "transforms.meta.type: is required" in problems(transforms="meta")


def test_unknown_transform() -> None:
    message = problems(transforms="x", **{"transforms.x.type": "com.example.Nope"})
    assert "transforms.x.type='com.example.Nope': unknown transform" in message


def test_errors_tolerance_not_allowed() -> None:
    assert "errors.tolerance='maybe': must be one of: none, all" in problems(**{"errors.tolerance": "maybe"})


def test_upsert_without_id_columns_is_valid_until_the_table_says_otherwise() -> None:
    """The table's identifier fields serve where no id columns are set, as Iceberg's writers take them: a
    table without either is refused when it is loaded, not here."""
    config = parse_connector({**GOOD, "iceberg.tables.upsert-mode-enabled": "true"}, WORKER)
    assert config.table("db.orders").keyed and config.table("db.orders").id_columns == []


def test_upsert_and_cdc_per_table_win_over_the_connector_keys() -> None:
    props = {**GOOD, "iceberg.tables": "db.orders,db.events,db.users", "iceberg.tables.default-id-columns": "id",
             "iceberg.tables.cdc-field": "op",
             "iceberg.table.db.events.cdc-field": "",
             "iceberg.table.db.users.cdc-field": "meta.kind", "iceberg.table.db.users.upsert-mode-enabled": "true"}
    config = parse_connector(props, WORKER)
    orders, events, users = (config.table(t) for t in ("db.orders", "db.events", "db.users"))
    assert (orders.keyed, orders.cdc_field, orders.upsert) == (True, "op", False)
    assert (events.keyed, events.cdc_field) == (False, None)
    assert (users.keyed, users.cdc_field, users.upsert) == (True, "meta.kind", True)
    append = parse_connector({**GOOD, "iceberg.table.db.orders.upsert-mode-enabled": "true",
                              "iceberg.table.db.orders.id-columns": "id"}, WORKER)
    assert append.may_key and append.table("db.orders").keyed and not append.upsert_mode
    assert not parse_connector(GOOD, WORKER).may_key
    assert "iceberg.table.db.orders.upsert-mode-enabled='yes': must be true or false" in problems(
        **{"iceberg.table.db.orders.upsert-mode-enabled": "yes", "iceberg.table.db.orders.id-columns": "id"})


def test_every_problem_is_listed_at_once() -> None:
    message = problems(name=None, **{"errors.tolerance": "x", "iceberg.control.commit.timeout-ms": "soon"})
    assert "3 problems" in message


def test_unknown_iceberg_key_is_a_warning_naming_it() -> None:
    config = parse_connector({**GOOD, "iceberg.tables.auto-create-enable": "true"}, WORKER)
    assert any("iceberg.tables.auto-create-enable" in w for w in config.warnings)


def test_worker_bootstrap_servers_malformed() -> None:
    with pytest.raises(ConfigError) as err:
        parse_worker({"bootstrap.servers": "localhost"})
    assert "bootstrap.servers=" in str(err.value) and "HOST:PORT" in str(err.value)


def test_worker_listener_malformed() -> None:
    with pytest.raises(ConfigError) as err:
        parse_worker({"listeners": "127.0.0.1:8083"})
    assert "listeners=" in str(err.value) and "http://HOST:PORT" in str(err.value)


def test_kafka_security_settings_are_checked_and_secrets_never_echoed() -> None:
    secret = "s3cr3t-Jaas-pw"
    with pytest.raises(ConfigError) as err:
        parse_worker({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI",
                      "sasl.jaas.config": f'x required username="u" password="{secret}";'})
    assert "GSSAPI is not supported" in str(err.value) and secret not in str(err.value)
    with pytest.raises(ConfigError) as err:
        parse_worker({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                      "sasl.jaas.config": f'org.apache.kafka.common.security.plain.PlainLoginModule required '
                                          f'username="u" password="{secret}";'})
    assert "needs ScramLoginModule" in str(err.value) and secret not in str(err.value)
    config = parse_worker({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
                           "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                               f'username="u" password="{secret}";'})
    assert config.raw["security.protocol"] == "SASL_PLAINTEXT"


def test_a_connector_without_a_catalog_is_refused_as_the_iceberg_sink_refuses_it() -> None:
    message = problems(**{"iceberg.catalog.type": None, "iceberg.catalog.warehouse": None})
    assert "iceberg.catalog.*: Must specify Iceberg catalog properties" in message


def test_properties_syntax() -> None:
    text = "# comment\n! also\nname = a\ntopics:b\nlong=one,\\\n    two\nspaced value\nescaped=a\\=b\n"
    assert parse_properties(text) == {"name": "a", "topics": "b", "long": "one,two", "spaced": "value",
                                      "escaped": "a=b"}


def test_connector_file_in_connect_rest_json_shape(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"name": "from-json", "config": {**{k: v for k, v in GOOD.items() if k != "name"},
                                                                "iceberg.tables.auto-create-enabled": True}}))
    config = parse_connector(load_config_file(path), WORKER)
    assert config.name == "from-json" and config.auto_create is True


def test_validate_command_prints_every_problem_and_fails(tmp_path: Path) -> None:
    path = tmp_path / "bad.properties"
    path.write_text("name=x\ntopics=t\niceberg.tables=db.t\niceberg.control.commit.interval-ms=-5\n"
                    "iceberg.tables.default-partition-by=hours(ts,1)\n")
    proc = subprocess.run([sys.executable, "-m", "tabletopic.cli", "validate", str(path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "iceberg.control.commit.interval-ms='-5'" in proc.stdout
    assert "iceberg.tables.default-partition-by='hours(ts,1)'" in proc.stdout


def test_validate_command_accepts_a_good_file(tmp_path: Path) -> None:
    path = tmp_path / "good.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in GOOD.items()))
    proc = subprocess.run([sys.executable, "-m", "tabletopic.cli", "validate", str(path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "is valid" in proc.stdout


def test_table_topic_mode_names_its_own_tables() -> None:
    props = {k: v for k, v in GOOD.items() if k not in ("iceberg.tables", "topics")}
    config = parse_connector({**props, "tabletopic.table-topic.enabled": "true", "topics.regex": r"events\..*"},
                             WORKER)
    assert config.table_topic_namespace == "default" and config.dynamic_enabled
    assert config.auto_create and config.evolve_schema
    assert "is not used in Table Topic mode" in problems(**{"tabletopic.table-topic.enabled": "true"})
    assert "tabletopic.table-topic.namespace='a..b'" in problems(**{
        "tabletopic.table-topic.enabled": "true", "iceberg.tables": None, "tabletopic.table-topic.namespace": "a..b"})


def test_a_table_another_engine_compacts_gets_maintenance_that_keeps_out_of_its_way() -> None:
    config = parse_connector({**GOOD, "iceberg.tables": "db.a,db.b", "iceberg.table.db.a.external-compaction": "true"},
                             WORKER)
    assert not config.warnings
    assert config.table("db.a").external_compaction and not config.table("db.b").external_compaction
    assert config.maintenance_of("db.a") == config.maintenance.beside_external_compaction()
    assert config.maintenance_of("db.b") is config.maintenance
    with pytest.raises(ConfigError, match=r"iceberg\.table\.db\.a\.external-compaction"):
        parse_connector({**GOOD, "iceberg.table.db.a.external-compaction": "yes"}, WORKER)


def test_the_iceberg_connectors_own_test_timeout_is_accepted_with_a_warning() -> None:
    """Every integration test of the Iceberg connector sets iceberg.control.commit.timeout-ms to
    Integer.MAX_VALUE: accepted, as Java accepts it, with what it means for orphan removal said."""
    config = parse_connector({**GOOD, "iceberg.control.commit.timeout-ms": "2147483647"}, WORKER)
    assert config.commit_timeout_ms == 2_147_483_647
    assert any("orphans.older-than-ms" in w and "read again" in w for w in config.warnings), config.warnings


# -- what a Connect configuration means here (issue 53) --------------------------------------------------
@pytest.mark.parametrize(("key", "near"), [("errors.tolerence", "errors.tolerance"),
                                           ("iceberg.tables.auto-create-enable", "iceberg.tables.auto-create-enabled"),
                                           ("topic", "topics"),
                                           ("iceberg.table.db.orders.id-colums", "iceberg.table.db.orders.id-columns"),
                                           ("value.convertor", "value.converter")])
def test_a_misspelt_key_is_told_with_the_key_it_misspells(key: str, near: str) -> None:
    config = parse_connector({**GOOD, key: "x"}, WORKER)
    assert any(w.startswith(f"unknown key {key!r} ignored") and f"did you mean {near!r}?" in w
               for w in config.warnings), config.warnings


def test_keys_inside_families_are_told_when_nothing_reads_them() -> None:
    config = parse_connector({**GOOD, "consumer.override.client.id": "x", "producer.override.linger.ms": "5",
                              "admin.override.ssl.truststore.location": "/t", "iceberg.kafka.acks": "all",
                              "transforms": "tag",
                              "transforms.tag.type": "org.apache.kafka.connect.transforms.InsertField$Value",
                              "transforms.tag.static.feild": "f", "transforms.tag.static.field": "s",
                              "transforms.tag.static.value": "v", "transforms.other.type": "Filter",
                              "predicates.p.type": "RecordIsTombstone"}, WORKER)
    told = "\n".join(config.warnings)
    assert "consumer.override.client.id is not applied" in told and "producer.override.linger.ms" in told
    assert "iceberg.kafka.acks is not applied" in told and "admin.override.ssl" not in told
    assert "unknown key 'transforms.tag.static.feild' ignored (InsertField$Value does not read it); did you mean " \
           "'transforms.tag.static.field'?" in told
    assert "transforms.other.type is ignored: 'other' is not listed in transforms" in told
    assert "predicates.p.type is ignored: 'p' is not listed in predicates" in told


def test_connect_plugin_names_simple_and_short() -> None:
    config = parse_connector({**GOOD, "connector.class": "IcebergSink", "value.converter": "JsonConverter",
                              "key.converter": "String", "transforms": "r,f", "transforms.r.type": "RegexRouter",
                              "transforms.r.regex": "(.*)", "transforms.r.replacement": "$1",
                              "transforms.f.type": "Filter", "transforms.f.predicate": "t",
                              "predicates": "t", "predicates.t.type": "RecordIsTombstone"}, WORKER)
    assert config.value_converter.class_name == "org.apache.kafka.connect.json.JsonConverter"
    assert config.key_converter.class_name == "org.apache.kafka.connect.storage.StringConverter"
    assert [t.class_name for t in config.transforms] == ["org.apache.kafka.connect.transforms.RegexRouter",
                                                         "org.apache.kafka.connect.transforms.Filter"]
    assert config.predicates[0].class_name == "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone"
    # A nested class's simple name (Value) names several plugins: Connect gives it no alias, nor does this sink.
    assert "unknown transform" in problems(transforms="c", transforms__c__type="Value")


@pytest.mark.parametrize(("changes", "message"), [
    ({"transforms.t.predicate": "nope"}, "transforms.t.predicate='nope': names a predicate, but predicates lists none"),
    ({"transforms.t.negate": "true"}, "transforms.t.negate='true': needs transforms.<alias>.predicate"),
    ({"transforms.t.negate": "yes", "transforms.t.predicate": "p", "predicates": "p",
      "predicates.p.type": "RecordIsTombstone"}, "transforms.t.negate='yes': must be true or false"),
    ({"predicates": "p", "predicates.p.type": "TopicNameMatches"}, "Missing required configuration \"pattern\""),
    ({"transforms.t.regex": "("}, "not a regular expression"),
])
def test_transform_and_predicate_settings_that_cannot_work_are_refused(changes: dict[str, str], message: str) -> None:
    props = {"transforms": "t", "transforms.t.type": "RegexRouter", "transforms.t.regex": ".*",
             "transforms.t.replacement": "x", **changes}
    assert message in problems(**{k.replace(".", "__"): v for k, v in props.items()})


def test_table_topic_mode_refuses_a_transform_that_renames_topics() -> None:
    changes = {"iceberg.tables": None, "tabletopic.table-topic.enabled": "true", "transforms": "r",
               "transforms.r.type": "RegexRouter", "transforms.r.regex": ".*", "transforms.r.replacement": "x"}
    message = problems(**{k.replace(".", "__"): v for k, v in changes.items()})
    assert "transforms.r.type='RegexRouter': gives records another topic, but Table Topic mode" in message


@pytest.mark.parametrize(("changes", "message"), [
    ({"errors.deadletterqueue.topic.name": "orders"},
     "The DLQ topic 'orders' may not be included in the list of topics ('topics=orders') to consume"),
    ({"topics": None, "topics.regex": "ord.*", "errors.deadletterqueue.topic.name": "orders-dlq"},
     "The DLQ topic 'orders-dlq' may not be included in the regex matching the topics ('topics.regex=ord.*')"),
])
def test_a_dead_letter_topic_the_connector_would_read_is_refused_as_connect_refuses_it(
        changes: dict[str, str | None], message: str) -> None:
    assert message in problems(**{k.replace(".", "__"): v for k, v in changes.items()})


def test_kafka_overrides_connect_applies_are_applied() -> None:
    config = parse_connector({**GOOD, "consumer.override.max.poll.records": "77",
                              "consumer.override.isolation.level": "read_committed",
                              "consumer.override.group.id": "legacy-group"}, WORKER)
    assert (config.max_poll_records, config.isolation_level, config.group_id) == (77, "read_committed",
                                                                                   "legacy-group")
    assert "must be read_uncommitted or read_committed" in problems(
        **{"consumer.override.isolation.level": "committed"})
    # iceberg.connect.group-id, the Iceberg sink's own key, wins.
    assert parse_connector({**GOOD, "consumer.override.group.id": "a", "iceberg.connect.group-id": "b"},
                           WORKER).group_id == "b"


def test_iceberg_kafka_goes_to_the_control_topic_clients_alone() -> None:
    from tabletopic.kafka.clients import KafkaClients

    config = parse_connector({**GOOD, "iceberg.kafka.bootstrap.servers": "10.0.0.9:9093",
                              "iceberg.kafka.security.protocol": "SSL"}, WORKER)
    clients = config.clients_of(KafkaClients(WORKER.bootstrap_servers, WORKER.raw))
    control = clients.for_control(config.control_kafka)
    assert control.bootstrap == ["10.0.0.9:9093"] and control.props("producer")["security.protocol"] == "SSL"
    assert clients.bootstrap == ["127.0.0.1:9092"] and "security.protocol" not in clients.props("consumer")


def test_connect_keys_this_sink_honours_or_that_change_nothing_here_are_known() -> None:
    config = parse_connector({**GOOD, "errors.retry.timeout": "-1", "errors.retry.delay.max.ms": "5000",
                              "errors.deadletterqueue.topic.replication.factor": "1",
                              "header.converter": "org.apache.kafka.connect.storage.SimpleHeaderConverter",
                              "config.action.reload": "none", "tasks.max.enforce": "true", "task.id": "0",
                              "iceberg.coordinator.transactional.prefix": "p"}, WORKER)
    assert not [w for w in config.warnings if "unknown key" in w or "not applied" in w]
    assert (config.retry_timeout_ms, config.retry_delay_max_ms, config.dlq_replication) == (-1, 5000, 1)


def test_the_java_commit_conflict_bound_and_this_sinks_refusal_bound_are_two_keys() -> None:
    config = parse_connector(GOOD, WORKER)
    assert (config.commit_max_conflicts, config.commit_max_refusals) == (None, 3)
    config = parse_connector({**GOOD, "iceberg.control.commit.max-consecutive-failures": "2",
                              "tabletopic.commit.max-consecutive-refusals": "5"}, WORKER)
    assert (config.commit_max_conflicts, config.commit_max_refusals) == (2, 5)


# Every SMT and predicate of Connect's docs (kafka.apache.org, "Transformations"), by the names its examples use,
# with the least settings each needs; then Debezium's and the Iceberg sink's.
CONNECT_DOCS_TRANSFORMS: dict[str, dict[str, str]] = {
    "org.apache.kafka.connect.transforms.Cast$Key": {"spec": "int64"},
    "org.apache.kafka.connect.transforms.Cast$Value": {"spec": "f:string"},
    "org.apache.kafka.connect.transforms.DropHeaders": {"headers": "h"},
    "org.apache.kafka.connect.transforms.ExtractField$Key": {"field": "id"},
    "org.apache.kafka.connect.transforms.ExtractField$Value": {"field": "after", "field.syntax.version": "V2"},
    "org.apache.kafka.connect.transforms.Filter": {},
    "org.apache.kafka.connect.transforms.Flatten$Key": {},
    "org.apache.kafka.connect.transforms.Flatten$Value": {"delimiter": "_"},
    "org.apache.kafka.connect.transforms.HeaderFrom$Key": {"fields": "id", "headers": "h", "operation": "copy"},
    "org.apache.kafka.connect.transforms.HeaderFrom$Value": {"fields": "a,b", "headers": "x,y", "operation": "move"},
    "org.apache.kafka.connect.transforms.HoistField$Key": {"field": "k"},
    "org.apache.kafka.connect.transforms.HoistField$Value": {"field": "v"},
    "org.apache.kafka.connect.transforms.InsertField$Key": {"static.field": "s", "static.value": "v"},
    "org.apache.kafka.connect.transforms.InsertField$Value": {"topic.field": "t", "offset.field": "o!"},
    "org.apache.kafka.connect.transforms.InsertHeader": {"header": "h", "value.literal": "v"},
    "org.apache.kafka.connect.transforms.MaskField$Key": {"fields": "k"},
    "org.apache.kafka.connect.transforms.MaskField$Value": {"fields": "ssn", "replacement": "***"},
    "RegexRouter": {"regex": "(.*)", "replacement": "$1"},
    "org.apache.kafka.connect.transforms.ReplaceField$Key": {"exclude": "x"},
    "org.apache.kafka.connect.transforms.ReplaceField$Value": {"include": "a", "renames": "a:b"},
    "org.apache.kafka.connect.transforms.SetSchemaMetadata$Key": {"schema.name": "k"},
    "org.apache.kafka.connect.transforms.SetSchemaMetadata$Value": {"schema.version": "2"},
    "org.apache.kafka.connect.transforms.TimestampConverter$Key": {"target.type": "unix"},
    "org.apache.kafka.connect.transforms.TimestampConverter$Value": {"field": "ts", "target.type": "string",
                                                                     "format": "yyyy-MM-dd"},
    "TimestampRouter": {"topic.format": "${topic}-${timestamp}", "timestamp.format": "yyyyMM"},
    "ValueToKey": {"fields": "id"},
    "io.debezium.transforms.ExtractNewRecordState": {"delete.tombstone.handling.mode": "rewrite",
                                                     "add.fields": "op,table,lsn", "route.by.field": "dest"},
    "org.apache.iceberg.connect.transforms.CopyValue": {"source.field": "a", "target.field": "b"},
    "org.apache.iceberg.connect.transforms.DmsTransform": {},
    "org.apache.iceberg.connect.transforms.JsonToMapTransform": {"json.root": "true"},
    "org.apache.iceberg.connect.transforms.KafkaMetadataTransform": {"nested": "true"},
    "org.apache.iceberg.connect.transforms.MongoDebeziumTransform": {"array_handling_mode": "document"},
    "org.apache.iceberg.connect.transforms.DebeziumTransform": {"cdc.target.pattern": "{db}.{table}"},
}
CONNECT_DOCS_PREDICATES = {"org.apache.kafka.connect.transforms.predicates.TopicNameMatches": {"pattern": "a.*"},
                           "HasHeaderKey": {"name": "h"}, "RecordIsTombstone": {}}


def test_validate_accepts_every_transform_predicate_and_converter_name_of_connects_docs(tmp_path: Path) -> None:
    props: dict[str, str] = {**GOOD, "connector.class": "IcebergSinkConnector", "key.converter": "StringConverter",
                             "value.converter": "org.apache.kafka.connect.json.JsonConverter"}
    aliases = []
    for i, (name, settings) in enumerate(CONNECT_DOCS_TRANSFORMS.items()):
        aliases.append(f"t{i}")
        props.update({f"transforms.t{i}.type": name, **{f"transforms.t{i}.{k}": v for k, v in settings.items()}})
    predicates = []
    for i, (name, settings) in enumerate(CONNECT_DOCS_PREDICATES.items()):
        predicates.append(f"p{i}")
        props.update({f"predicates.p{i}.type": name, **{f"predicates.p{i}.{k}": v for k, v in settings.items()}})
        props.update({f"transforms.t{i}.predicate": f"p{i}", f"transforms.t{i}.negate": "true"})
    props.update({"transforms": ",".join(aliases), "predicates": ",".join(predicates)})
    path = tmp_path / "every.json"
    path.write_text(json.dumps({"name": "every", "config": props}))
    proc = subprocess.run([sys.executable, "-m", "tabletopic.cli", "validate", str(path)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "warning" not in proc.stdout, proc.stdout
    # The converters by their Connect names and short aliases.
    for converter in ("JsonConverter", "Json", "StringConverter", "String", "ByteArrayConverter", "ByteArray",
                      "org.apache.kafka.connect.converters.ByteArrayConverter"):
        assert parse_connector({**GOOD, "value.converter": converter}, WORKER).value_converter.class_name.endswith(
            converter if "." in converter else converter.removesuffix("Converter") + "Converter")


def test_validate_tells_a_misspelt_key_with_the_key_it_misspells(tmp_path: Path) -> None:
    path = tmp_path / "typo.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in {**GOOD, "errors.tolerence": "all"}.items()))
    proc = subprocess.run([sys.executable, "-m", "tabletopic.cli", "validate", str(path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    assert "warning: unknown key 'errors.tolerence' ignored; did you mean 'errors.tolerance'?" in proc.stdout


def test_iceberg_hadoop_conf_dir_configures_the_catalogs_hadoop_configuration(tmp_path: Path) -> None:
    (tmp_path / "core-site.xml").write_text(
        "<configuration><property><name>fs.s3a.endpoint</name><value>http://127.0.0.1:9000</value></property>"
        "<property><name>fs.defaultFS</name><value>file:///</value></property></configuration>")
    (tmp_path / "hive-site.xml").write_text("<configuration><property><name>hive.metastore.uris</name>"
                                            "<value>thrift://127.0.0.1:9083</value></property></configuration>")
    config = parse_connector({**GOOD, "iceberg.hadoop-conf-dir": str(tmp_path),
                              "iceberg.hadoop.fs.defaultFS": "file:///other"}, WORKER)
    props = config.catalog_props
    assert props["hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert props["hadoop.hive.metastore.uris"] == "thrift://127.0.0.1:9083"
    assert props["hadoop.fs.defaultFS"] == "file:///other"  # iceberg.hadoop.* wins
    (tmp_path / "hdfs-site.xml").write_text("<configuration><property>")
    assert "hdfs-site.xml cannot be read as Hadoop's XML configuration" in problems(
        **{"iceberg.hadoop-conf-dir": str(tmp_path)})
    assert "is not a directory" in problems(**{"iceberg.hadoop-conf-dir": str(tmp_path / "nope")})
