"""A connector's configuration parsed into one typed object, with the checks that span several keys.

The keys themselves are declared in :mod:`tabletopic.config.connector_keys`; the converters and
transforms they name are resolved in :mod:`tabletopic.config.plugin_specs`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from tabletopic.config.catalog_settings import CatalogPlan, plan_catalog
from tabletopic.config.connector_keys import (
    ADMIN_OVERRIDE_PREFIX,
    AUTO_CREATE_PREFIX,
    CATALOG_PREFIX,
    CONNECTOR_KEYS,
    CONSUMER_OVERRIDE_PREFIX,
    HADOOP_PREFIX,
    KAFKA_PREFIX,
    PRODUCER_OVERRIDE_PREFIX,
    TABLE_PREFIX,
    WRITE_PREFIX,
    partition_by_problem,
)
from tabletopic.config.definition import (
    ConfigError,
    Key,
    KeyType,
    Parsed,
    Problem,
    parse_keys,
    parse_value,
    prefixed,
)
from tabletopic.config.hadoop_conf_dir import hadoop_conf_dir_props
from tabletopic.config.maintenance_settings import MaintenanceSettings, settings_from
from tabletopic.config.partition_by import PartitionField, parse_partition_by
from tabletopic.config.plugin_specs import PluginSpec, converter_spec, predicate_specs, transform_specs
from tabletopic.config.unknown_keys import unknown_warnings
from tabletopic.config.worker import WORKER_KEYS, WorkerConfig
from tabletopic.kafka.clients import KafkaClients, security_problem
from tabletopic.observe.secrets import redacted_repr


@dataclass(frozen=True)
class TableConfig:
    name: str
    route_regex: re.Pattern[str] | None
    id_columns: list[str]
    partition_by: list[PartitionField]
    commit_branch: str | None
    upsert: bool
    cdc_field: str | None
    external_compaction: bool = False  # another engine compacts it: commits carry no position deletes

    @property
    def keyed(self) -> bool:
        """Upsert or CDC: the table's rows are replaced and deleted by their id columns."""
        return self.upsert or bool(self.cdc_field)


@dataclass(repr=False)
class ConnectorConfig:
    name: str
    topics: list[str] | None
    topics_regex: re.Pattern[str] | None
    key_converter: PluginSpec
    value_converter: PluginSpec
    transforms: list[PluginSpec]
    predicates: list[PluginSpec]  # those transforms name; each transform's spec says which, and negate
    tables: list[str] | None
    dynamic_enabled: bool  # tables found as records arrive: by a route field, or by topic (Table Topic mode)
    table_topic_namespace: str | None  # Table Topic mode's namespace; None when it is off
    route_field: str | None
    auto_create: bool
    evolve_schema: bool
    force_optional: bool
    case_insensitive: bool
    strict_values: bool  # tabletopic.values.strict: refuse what the Java sink's conversions would change
    skip_unroutable: bool  # tabletopic.routing.unroutable=skip: a record dynamic routing cannot place is left out
    upsert_mode: bool
    cdc_field: str | None
    auto_create_props: dict[str, str]
    write_props: dict[str, str]
    commit_interval_ms: int
    commit_timeout_ms: int
    commit_threads: int
    commit_stall_intervals: int
    commit_max_refusals: int  # rounds in a row a table's commit may be refused for one cause
    commit_max_conflicts: int | None  # rounds in a row a table's commit may conflict; None: no bound
    catalog_max_failures: int
    control_topic: str
    control_group_prefix: str
    catalog_name: str
    catalog: CatalogPlan  # which catalog and storage the keys select; its props are what Iceberg gets
    group_id: str
    errors_tolerance: str
    dlq_topic: str | None
    dlq_replication: int  # of the dead-letter topic, created when missing; -1: the broker's default
    retry_timeout_ms: int  # how long a system outage is retried: 0 no bound of time, -1 none at all
    retry_delay_max_ms: int  # the longest backoff between two tries
    dlq_context_headers: bool
    errors_log_enable: bool
    errors_log_include_messages: bool
    max_value_bytes: int
    buffer_flush_bytes: int
    write_parallelism: int
    parquet_encoder: str
    tables_max_cached: int
    tables_idle_release_ms: int
    buffer_max_bytes: int
    offsets_refresh_rounds: int
    maintenance: MaintenanceSettings
    consumer_overrides: dict[str, str]  # consumer.override.*: the source topics' consumer
    producer_overrides: dict[str, str]  # producer.override.*: the dead-letter producer
    admin_overrides: dict[str, str]  # admin.override.*: the connector's admin clients
    control_kafka: dict[str, str]  # iceberg.kafka.*: the control topic's clients, as the Iceberg sink's
    fetch_min_bytes: int  # the sink consumer's, its consumer.override first, then the worker's
    fetch_max_wait_ms: int
    max_poll_records: int  # the sink consumer's, its consumer.override first, then the worker's
    isolation_level: str
    raw: dict[str, str] = field(repr=False)  # resolved: config provider placeholders replaced; holds secrets
    written: dict[str, str]  # as written, placeholders kept: what may be shown
    warnings: list[str] = field(default_factory=list)
    _tables: dict[str, TableConfig] = field(default_factory=dict, repr=False)

    def __repr__(self) -> str:
        return redacted_repr(self)  # it holds secrets: shown as a response shows them

    @property
    def catalog_props(self) -> dict[str, str]:
        return self.catalog.props

    def table(self, name: str) -> TableConfig:
        """Per-table settings, falling back to the iceberg.tables.default-* keys."""
        if name not in self._tables:
            own = prefixed(self.raw, f"{TABLE_PREFIX}{name}.")
            regex = own.get("route-regex")
            ids = own.get("id-columns", self.raw.get("iceberg.tables.default-id-columns") or "")
            part = own.get("partition-by", self.raw.get("iceberg.tables.default-partition-by") or "")
            upsert, cdc_field = _change_keys(own, self.upsert_mode, self.cdc_field)
            self._tables[name] = TableConfig(
                name=name,
                route_regex=re.compile(regex) if regex else None,
                id_columns=[c.strip() for c in ids.split(",") if c.strip()],
                partition_by=parse_partition_by(part) if part else [],
                commit_branch=own.get("commit-branch", self.raw.get("iceberg.tables.default-commit-branch")),
                upsert=upsert,
                cdc_field=cdc_field,
                external_compaction=_true(own.get("external-compaction")),
            )
        return self._tables[name]

    def clients_of(self, kafka: KafkaClients) -> KafkaClients:
        """The worker's Kafka clients with this connector's consumer, producer and admin overrides."""
        return kafka.for_connector(self.consumer_overrides, self.producer_overrides, self.admin_overrides)

    def maintenance_of(self, table: str) -> MaintenanceSettings:
        """The maintenance settings of one table: the connector's, or for a table another engine
        compacts, those that keep out of that engine's way."""
        return self.maintenance.beside_external_compaction() if self.table(table).external_compaction \
            else self.maintenance

    @property
    def may_key(self) -> bool:
        """Whether any table may be keyed: then tombstones are made into deletes, for the tables that are."""
        return self.upsert_mode or bool(self.cdc_field) or any(
            _per_table_keyed(key, value) for key, value in self.raw.items() if key.startswith(TABLE_PREFIX))


def _true(value: str | None) -> bool:
    return str(value).strip().lower() == "true"


def _change_keys(own: Mapping[str, str], upsert: bool, cdc_field: str | None) -> tuple[bool, str | None]:
    """A table's upsert mode and cdc field: its own keys (``own``, unprefixed) where set, else the connector's."""
    return (_true(own["upsert-mode-enabled"]) if "upsert-mode-enabled" in own else upsert,
            (own["cdc-field"] or None) if "cdc-field" in own else cdc_field)


def _per_table_keyed(key: str, value: str) -> bool:
    return (key.endswith(".upsert-mode-enabled") and _true(value)) or (key.endswith(".cdc-field") and bool(value))


def _catalog_props(props: Mapping[str, str], out: Parsed) -> dict[str, str]:
    catalog = prefixed(props, CATALOG_PREFIX)
    if not catalog:
        # As the Iceberg sink: a table in an unnamed place (a warehouse in the working directory) is lost
        # the day the daemon runs elsewhere.
        out.problems.append(Problem(CATALOG_PREFIX + "*", None, "Must specify Iceberg catalog properties: at least "
                                    "iceberg.catalog.type (or catalog-impl) and where the tables live, e.g. "
                                    "iceberg.catalog.type=hadoop with iceberg.catalog.warehouse=file:///var/lib/"
                                    "tabletopic/warehouse"))
        catalog = {"type": "hadoop", "warehouse": "file://" + os.path.abspath("warehouse")}
    for key, value in prefixed(props, HADOOP_PREFIX).items():
        catalog.setdefault(f"hadoop.{key}", value)
    if props.get("iceberg.hadoop-conf-dir"):
        found, problems = hadoop_conf_dir_props(props["iceberg.hadoop-conf-dir"])
        out.problems.extend(Problem("iceberg.hadoop-conf-dir", props["iceberg.hadoop-conf-dir"], p) for p in problems)
        for key, value in found.items():
            catalog.setdefault(f"hadoop.{key}", value)
    return catalog


def _check_tables(values: dict[str, Any], props: Mapping[str, str], out: Parsed) -> None:
    tables, dynamic, route_field = values["iceberg.tables"], values["iceberg.tables.dynamic-enabled"], \
        values["iceberg.tables.route-field"]
    if values["tabletopic.table-topic.enabled"]:
        for key in ("iceberg.tables", "iceberg.tables.dynamic-enabled", "iceberg.tables.route-field"):
            if props.get(key) and values[key]:
                out.problems.append(Problem(key, props.get(key), "is not used in Table Topic mode "
                                            "(tabletopic.table-topic.enabled=true): each topic names its table"))
        namespace = values["tabletopic.table-topic.namespace"]
        if not re.fullmatch(r"[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)*", namespace or ""):
            out.problems.append(Problem("tabletopic.table-topic.namespace", namespace,
                                        "a namespace is letters, digits and _, its levels joined by dots"))
        return
    if tables and dynamic:
        out.problems.append(Problem("iceberg.tables.dynamic-enabled", True,
                                    "cannot be true while iceberg.tables lists static tables; choose one"))
    elif dynamic and not route_field:
        out.problems.append(Problem("iceberg.tables.route-field", None,
                                    "is required when iceberg.tables.dynamic-enabled=true"))
    elif not tables and not dynamic:
        out.problems.append(Problem("iceberg.tables", None,
                                    "is required: list the destination tables, or set "
                                    "iceberg.tables.dynamic-enabled=true with iceberg.tables.route-field"))
    for name in tables or []:
        if not re.fullmatch(r"[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)+|[A-Za-z0-9_]+", name):
            out.problems.append(Problem("iceberg.tables", name,
                                        "table names are namespace.table with letters, digits and _"))
    for key, value in props.items():
        if key.startswith(TABLE_PREFIX) and key.endswith(".route-regex"):
            try:
                re.compile(value)
            except re.error as exc:
                out.problems.append(Problem(key, value, f"is not a valid regular expression: {exc}"))
        if key.startswith(TABLE_PREFIX) and key.endswith(".partition-by"):
            message = partition_by_problem(value)
            if message:
                out.problems.append(Problem(key, value, message))
        if key.startswith(TABLE_PREFIX) and key.endswith((".upsert-mode-enabled", ".external-compaction")):
            parse_value(Key(key, KeyType.BOOLEAN, False, ""), value, out)  # told as any boolean key is


def _check_dead_letter_topic(values: dict[str, Any], out: Parsed) -> None:
    """As Connect: a dead-letter topic the connector would read itself is refused (its records would come back
    to fail again)."""
    topic = values["errors.deadletterqueue.topic.name"]
    if not topic:
        return
    if topic in (values["topics"] or []):
        out.problems.append(Problem("errors.deadletterqueue.topic.name", topic,
                                    f"The DLQ topic '{topic}' may not be included in the list of topics "
                                    f"('topics={','.join(values['topics'])}') to consume"))
    regex = values["topics.regex"]
    if regex is not None and regex.fullmatch(topic):
        out.problems.append(Problem("errors.deadletterqueue.topic.name", topic,
                                    f"The DLQ topic '{topic}' may not be included in the regex matching the topics "
                                    f"('topics.regex={regex.pattern}') to consume"))


def parse_connector(props: Mapping[str, Any], worker: WorkerConfig) -> ConnectorConfig:
    """Validate a connector configuration; raise ConfigError listing every problem."""
    written = {str(k): str(v) if not isinstance(v, str) else v for k, v in props.items() if v is not None}
    out = Parsed()
    props = worker.providers.resolve(written, out.problems)
    worker.scrubber.learn(props)
    parse_keys(CONNECTOR_KEYS, props, out)
    values = out.values
    if bool(values["topics"]) == bool(values["topics.regex"]):
        out.problems.append(Problem("topics", props.get("topics"), "set exactly one of topics and topics.regex"))
    _check_tables(values, props, out)
    out.warnings.extend(unknown_warnings(props, values["transforms"], values["predicates"]))
    _check_dead_letter_topic(values, out)
    round_ms = values["iceberg.control.commit.interval-ms"] + values["iceberg.control.commit.timeout-ms"]
    if values["tabletopic.maintenance.orphans.older-than-ms"] < 6 * round_ms:
        # Safe either way: a file that waited for half the guard is never committed (its records are read
        # again), so orphan removal never takes a file on its way to a snapshot. A long timeout (the Iceberg
        # connector's tests set Integer.MAX_VALUE) only makes a round that really waits so long read again.
        out.warnings.append(
            f"tabletopic.maintenance.orphans.older-than-ms={values['tabletopic.maintenance.orphans.older-than-ms']} "
            f"is less than 6 commit rounds of iceberg.control.commit.interval-ms + timeout-ms ({6 * round_ms} ms): "
            "a round that takes more than half of it has its files refused and its records read again, so that "
            "orphan removal never takes a file on its way to a snapshot; raise older-than-ms if rounds may take "
            "that long")
    if values["errors.deadletterqueue.topic.name"] and values["errors.tolerance"] != "all":
        out.warnings.append("errors.deadletterqueue.topic.name is set but errors.tolerance=none: "
                            "failed records stop the connector and never reach the dead-letter topic")
    key_conv = converter_spec(props, "key.converter", worker.key_converter, worker, out)
    value_conv = converter_spec(props, "value.converter", worker.value_converter, worker, out)
    predicates = predicate_specs(props, values["predicates"], out)
    transforms = transform_specs(props, values["transforms"], predicates, out,
                                 bool(values["tabletopic.table-topic.enabled"]))
    overrides = prefixed(props, CONSUMER_OVERRIDE_PREFIX)
    producer_overrides = prefixed(props, PRODUCER_OVERRIDE_PREFIX)
    admin_overrides = prefixed(props, ADMIN_OVERRIDE_PREFIX)
    control_kafka = prefixed(props, KAFKA_PREFIX)
    clients = KafkaClients(worker.bootstrap_servers, worker.raw).for_connector(overrides, producer_overrides,
                                                                                admin_overrides)
    fetch_min_bytes = _consumer_override("fetch.min.bytes", overrides, worker.fetch_min_bytes, out)
    fetch_max_wait_ms = _consumer_override("fetch.max.wait.ms", overrides, worker.fetch_max_wait_ms, out)
    max_poll_records = _consumer_override("max.poll.records", overrides, worker.max_poll_records, out)
    isolation_level = overrides.get("isolation.level", "read_uncommitted").strip()
    if isolation_level not in ("read_uncommitted", "read_committed"):
        out.problems.append(Problem(CONSUMER_OVERRIDE_PREFIX + "isolation.level", isolation_level,
                                    "must be read_uncommitted or read_committed"))
    for role, prefix in (("consumer", CONSUMER_OVERRIDE_PREFIX), ("producer", PRODUCER_OVERRIDE_PREFIX),
                         ("admin", ADMIN_OVERRIDE_PREFIX)):
        why = security_problem(clients.props(role))
        if why is not None:
            out.problems.append(Problem(f"{prefix}* security", None, why))
    why = security_problem(clients.for_control(control_kafka).props("producer"))
    if why is not None:
        out.problems.append(Problem(f"{KAFKA_PREFIX}* security", None, why))
    catalog = plan_catalog(_catalog_props(props, out), worker.spark_conf.get("spark.jars", ""))
    out.problems.extend(Problem("iceberg.catalog.*", None, why) for why in catalog.problems)
    if out.problems:
        raise ConfigError(out.problems, f"connector {props.get('name', '<unnamed>')!r}", out.warnings)
    table_topic = bool(values["tabletopic.table-topic.enabled"])  # a topic becomes a table, as it is and as it changes
    return ConnectorConfig(
        name=values["name"],
        topics=values["topics"],
        topics_regex=values["topics.regex"],
        key_converter=key_conv,
        value_converter=value_conv,
        transforms=transforms,
        predicates=predicates,
        tables=values["iceberg.tables"],
        dynamic_enabled=values["iceberg.tables.dynamic-enabled"] or table_topic,
        table_topic_namespace=values["tabletopic.table-topic.namespace"] if table_topic else None,
        route_field=values["iceberg.tables.route-field"],
        auto_create=values["iceberg.tables.auto-create-enabled"] or table_topic,
        evolve_schema=values["iceberg.tables.evolve-schema-enabled"] or table_topic,
        force_optional=values["iceberg.tables.schema-force-optional"],
        case_insensitive=values["iceberg.tables.schema-case-insensitive"],
        strict_values=values["tabletopic.values.strict"],
        skip_unroutable=values["tabletopic.routing.unroutable"] == "skip",
        upsert_mode=values["iceberg.tables.upsert-mode-enabled"],
        cdc_field=values["iceberg.tables.cdc-field"],
        auto_create_props=prefixed(props, AUTO_CREATE_PREFIX),
        write_props=prefixed(props, WRITE_PREFIX),
        commit_interval_ms=values["iceberg.control.commit.interval-ms"],
        commit_timeout_ms=values["iceberg.control.commit.timeout-ms"],
        commit_threads=values["iceberg.control.commit.threads"],
        commit_stall_intervals=values["tabletopic.commit.stall-intervals"],
        commit_max_refusals=values["tabletopic.commit.max-consecutive-refusals"],
        commit_max_conflicts=values["iceberg.control.commit.max-consecutive-failures"],
        catalog_max_failures=values["tabletopic.catalog.max-consecutive-failures"],
        control_topic=values["iceberg.control.topic"],
        control_group_prefix=values["iceberg.control.group-id-prefix"],
        catalog_name=values["iceberg.catalog"],
        catalog=catalog,
        group_id=values["iceberg.connect.group-id"] or overrides.get("group.id") or f"connect-{values['name']}",
        errors_tolerance=values["errors.tolerance"],
        dlq_topic=values["errors.deadletterqueue.topic.name"],
        dlq_replication=values["errors.deadletterqueue.topic.replication.factor"],
        retry_timeout_ms=values["errors.retry.timeout"],
        retry_delay_max_ms=values["errors.retry.delay.max.ms"],
        dlq_context_headers=values["errors.deadletterqueue.context.headers.enable"],
        errors_log_enable=values["errors.log.enable"],
        errors_log_include_messages=values["errors.log.include.messages"],
        max_value_bytes=values["tabletopic.input.max-value-bytes"],
        buffer_flush_bytes=values["tabletopic.buffer.flush-bytes"],
        write_parallelism=values["tabletopic.write.parallelism"],
        parquet_encoder=values["tabletopic.write.parquet-encoder"],
        tables_max_cached=values["tabletopic.tables.max-cached"],
        tables_idle_release_ms=values["tabletopic.tables.idle-release-ms"],
        buffer_max_bytes=values["tabletopic.buffer.max-bytes"],
        offsets_refresh_rounds=values["tabletopic.offsets.refresh-rounds"],
        maintenance=settings_from(values),
        consumer_overrides=overrides,
        producer_overrides=producer_overrides,
        admin_overrides=admin_overrides,
        control_kafka=control_kafka,
        fetch_min_bytes=fetch_min_bytes,
        fetch_max_wait_ms=fetch_max_wait_ms,
        max_poll_records=max_poll_records,
        isolation_level=isolation_level,
        raw=props,
        written=written,
        warnings=out.warnings,
    )


def _consumer_override(name: str, overrides: Mapping[str, str], worker_value: Any, out: Parsed) -> Any:
    """A connector's ``consumer.override.<name>`` of the worker's typed ``consumer.<name>``, checked as that
    key is; the worker's value when the connector sets none."""
    if name not in overrides:
        return worker_value
    key = replace(WORKER_KEYS[f"consumer.{name}"], name=CONSUMER_OVERRIDE_PREFIX + name)
    return parse_value(key, overrides[name], out)
