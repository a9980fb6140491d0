"""The connector configuration: the Iceberg sink connector's keys, with its defaults.

A connector file written for ``org.apache.iceberg.connect.IcebergSinkConnector``
works as it is.  Keys that only tabletopic has live under ``tabletopic.``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

from tabletopic.config.catalog_settings import CatalogPlan, plan_catalog
from tabletopic.config.definition import (
    ConfigError,
    Key,
    KeyType,
    Parsed,
    Problem,
    aliases,
    parse_keys,
    parse_value,
    prefixed,
)
from tabletopic.config.input_limits import DEFAULT_MAX_VALUE_BYTES, NESTING_DEPTH_KEY, nesting_limit
from tabletopic.config.maintenance_settings import MaintenanceSettings, settings_from
from tabletopic.config.partition_by import PartitionField, parse_partition_by
from tabletopic.config.worker import WorkerConfig, builtin_registry_url
from tabletopic.kafka_clients import KafkaClients, security_problem

CONNECTOR_CLASSES = (
    "org.apache.iceberg.connect.IcebergSinkConnector",
    "io.tabular.iceberg.connect.IcebergSinkConnector",
    "tabletopic.IcebergSinkConnector",
)
CATALOG_PREFIX = "iceberg.catalog."
HADOOP_PREFIX = "iceberg.hadoop."
TABLE_PREFIX = "iceberg.table."
AUTO_CREATE_PREFIX = "iceberg.tables.auto-create-props."
WRITE_PREFIX = "iceberg.tables.write-props."
KAFKA_PREFIX = "iceberg.kafka."
CONSUMER_OVERRIDE_PREFIX = "consumer.override."
PRODUCER_OVERRIDE_PREFIX = "producer.override."
TABLE_KEYS = ("route-regex", "id-columns", "partition-by", "commit-branch", "upsert-mode-enabled", "cdc-field")
CONVERTER_GROUP = "tabletopic.converters"
# Converters that read schema ids: they need schema.registry.url, or the worker's built-in registry.
REGISTRY_CONVERTERS = {"io.confluent.connect.avro.AvroConverter", "io.confluent.connect.protobuf.ProtobufConverter",
                       "io.confluent.connect.json.JsonSchemaConverter"}
TRANSFORM_GROUP = "tabletopic.transforms"


def _partition_by_problem(value: str) -> str | None:
    try:
        parse_partition_by(value)
    except ValueError as exc:
        return str(exc)
    return None


def _keys(*keys: Key) -> dict[str, Key]:
    return {k.name: k for k in keys}


CONNECTOR_KEYS: dict[str, Key] = _keys(
    Key("name", KeyType.STRING, None, "Unique connector name; also names the consumer group (connect-<name>).",
        required=True),
    Key("connector.class", KeyType.STRING, CONNECTOR_CLASSES[0],
        "Accepted for compatibility; must name an Iceberg sink connector class.", allowed=CONNECTOR_CLASSES),
    Key("tasks.max", KeyType.INT, 1, "Accepted for compatibility. Parallelism comes from partitions and daemons.",
        minimum=1),
    Key("topics", KeyType.LIST, None, "Comma-separated topics to consume. Set this or topics.regex."),
    Key("topics.regex", KeyType.REGEX, None, "Regular expression of topics to consume. Set this or topics."),
    Key("key.converter", KeyType.STRING, None, "Converter class for record keys; defaults to the worker's."),
    Key("value.converter", KeyType.STRING, None, "Converter class for record values; defaults to the worker's."),
    Key("transforms", KeyType.LIST, [], "Comma-separated aliases of single message transforms, applied in order; "
        "each is configured by transforms.<alias>.type and transforms.<alias>.*."),
    Key("errors.tolerance", KeyType.STRING, "none",
        "none: a record that cannot be converted, transformed or routed stops the connector before its offset "
        "is committed. all: such records are skipped (and sent to the dead-letter topic if one is set).",
        allowed=("none", "all")),
    Key("errors.deadletterqueue.topic.name", KeyType.STRING, None,
        "Topic that receives records failed under errors.tolerance=all, unchanged."),
    Key("errors.deadletterqueue.context.headers.enable", KeyType.BOOLEAN, False,
        "Add __connect.errors.* headers naming the failure to dead-letter records."),
    Key("errors.log.enable", KeyType.BOOLEAN, False, "Log each failed record's topic, partition and offset."),
    Key("errors.log.include.messages", KeyType.BOOLEAN, False, "Include the failed record's key and value in the log."),
    Key("tabletopic.input.max-value-bytes", KeyType.LONG, DEFAULT_MAX_VALUE_BYTES,
        "A record whose key or value is larger than this fails (errors.tolerance: stopped, or skipped and "
        "dead-lettered) before any converter parses it. JSON values are also bounded in depth, by the "
        "converter's max.nesting.depth (value.converter.max.nesting.depth, default 1000, as Jackson bounds "
        "Connect's JsonConverter).", minimum=1024),
    Key("iceberg.tables", KeyType.LIST, None, "Comma-separated destination tables (namespace.table)."),
    Key("iceberg.tables.dynamic-enabled", KeyType.BOOLEAN, False,
        "Route each record to the table named by its iceberg.tables.route-field value."),
    Key("tabletopic.table-topic.enabled", KeyType.BOOLEAN, False,
        "Table Topic mode (as AutoMQ's automq.table.topic.enable): every topic that topics or topics.regex "
        "matches is written to its own table, named after the topic in tabletopic.table-topic.namespace "
        "(lower-cased; characters other than letters, digits and _ become _). Tables are created and "
        "evolved from the records; iceberg.table.<namespace>.<table>.* set each one's id columns and "
        "partitioning. Not with iceberg.tables or routing."),
    Key("tabletopic.table-topic.namespace", KeyType.STRING, "default",
        "Namespace of Table Topic mode's tables (as AutoMQ's automq.table.topic.namespace)."),
    Key("iceberg.tables.route-field", KeyType.STRING, None,
        "Record field used for routing: the table name (dynamic) or the value matched by "
        "iceberg.table.<t>.route-regex (static). Dots reach into structs."),
    Key("iceberg.tables.default-id-columns", KeyType.STRING, None,
        "Default identifier columns, comma-separated (upsert keys; set as the table's identifier fields)."),
    Key("iceberg.tables.default-partition-by", KeyType.STRING, None,
        "Default partition spec of auto-created tables, e.g. day(ts),bucket(id, 16).",
        validator=_partition_by_problem),
    Key("iceberg.tables.default-commit-branch", KeyType.STRING, None, "Default branch to commit to (main if unset)."),
    Key("iceberg.tables.auto-create-enabled", KeyType.BOOLEAN, False,
        "Create missing tables (format v2) with the schema of the first records routed to them."),
    Key("iceberg.tables.evolve-schema-enabled", KeyType.BOOLEAN, False,
        "Add new record fields to the table schema and widen types in place."),
    Key("iceberg.tables.schema-force-optional", KeyType.BOOLEAN, False,
        "Make every column optional when creating or evolving tables."),
    Key("iceberg.tables.schema-case-insensitive", KeyType.BOOLEAN, False,
        "Match record fields to table columns ignoring case."),
    Key("iceberg.tables.upsert-mode-enabled", KeyType.BOOLEAN, False,
        "Upsert on the id columns: each record replaces the row with its key."),
    Key("iceberg.tables.cdc-field", KeyType.STRING, None,
        "Record field holding the change operation (I/U/D, or Debezium's c/r/u/d)."),
    Key("iceberg.control.topic", KeyType.STRING, "control-iceberg",
        "Control topic shared by the workers and the coordinator of this connector."),
    Key("iceberg.control.group-id-prefix", KeyType.STRING, "cg-control-",
        "Accepted for compatibility; members read the control topic without a consumer group."),
    Key("iceberg.control.commit.interval-ms", KeyType.INT, 300_000,
        "Time between commit rounds, from the start of one to the next: each round makes one snapshot per "
        "table that has new data.", minimum=1),
    Key("iceberg.control.commit.timeout-ms", KeyType.INT, 30_000,
        "How long the coordinator waits for every partition's answer; it then commits what arrived, and "
        "late answers wait for the next round. Also bounds one table commit.", minimum=1),
    Key("iceberg.control.commit.threads", KeyType.INT, 2, "Tables committed in parallel in a round.", minimum=1),
    Key("tabletopic.commit.stall-intervals", KeyType.INT, 3,
        "/ready answers 503 (and tabletopic_commit_stalled_seconds rises) once no round has committed, or this "
        "worker's answer has had no verdict, for this many intervals plus the commit timeout.", minimum=1),
    Key("tabletopic.catalog.max-consecutive-failures", KeyType.INT, 10,
        "A catalog or storage failure while opening, creating or evolving a table, or a Schema Registry that "
        "does not answer, is retried with backoff "
        "(1 s doubling to 30 s); records are read again, never dead-lettered. After this many failures in a "
        "row the connector stops (exit 1) so that a supervisor restarts it.", minimum=1),
    Key("iceberg.catalog", KeyType.STRING, "iceberg", "Name of the Iceberg catalog (the Spark catalog name)."),
    Key("iceberg.connect.group-id", KeyType.STRING, None, "Consumer group of the source topics (connect-<name>)."),
    Key("iceberg.hadoop-conf-dir", KeyType.STRING, None, "Accepted for compatibility; set HADOOP_CONF_DIR instead."),
    Key("tabletopic.buffer.flush-bytes", KeyType.LONG, 64 * 1024 * 1024,
        "When a table's buffered records exceed this many bytes they are written to data files before the "
        "round (and committed in it), bounding the daemon's memory.", minimum=1024),
    Key("tabletopic.buffer.max-bytes", KeyType.LONG, 512 * 1024 * 1024,
        "Arrow bytes of the rows held for all tables, buffered or being written, with the records fetched and "
        "not yet taken. Past it the connector pauses its partitions (no rebalance) and hands its rows to the "
        "coordinator for an early commit, and resumes once they are drained.", minimum=1024),
    Key("tabletopic.offsets.refresh-rounds", KeyType.INT, 10,
        "A table that gets no records still has its offsets committed (a snapshot without files) once this "
        "many rounds have passed, which bounds the replay after a restart.", minimum=1,
        aliases=("tabletopic.offsets.refresh-barriers",)),
    Key("tabletopic.maintenance.enabled", KeyType.STRING, "auto",
        "Table maintenance by the connector's coordinator (equality deletes turned into position deletes, "
        "compaction folding deletes, snapshot expiry, "
        "orphan removal, manifest rewrite): auto runs it when upsert or CDC is on, true always, false never.",
        allowed=("auto", "true", "false")),
    Key("tabletopic.maintenance.interval-ms", KeyType.LONG, 600_000,
        "How often each table is looked at; a look reads only metadata, and acts when a trigger below is met.",
        minimum=0),
    Key("tabletopic.maintenance.equality-deletes.convert", KeyType.STRING, "commit",
        "Turn the table's equality deletes into position deletes: only the key columns of the data files they "
        "apply to are read, no data file is rewritten, and readers then skip deleted rows by position instead of "
        "comparing every row with every key. commit: each commit carries position deletes in place of its "
        "equality deletes, found in the table as it is then (while the data files whose key bounds may hold "
        "a deleted key hold at most equality-deletes.commit-max-rows rows, and not while maintenance compacts "
        "it), so readers never meet them; the next round converts what is left. look: at each look, after "
        "compaction; round: after every commit round too (each conversion reads the key columns of the data "
        "files the new deletes apply to, which in a table keyed across partitions is all of them); off: "
        "equality deletes stay until compaction folds them.",
        allowed=("commit", "look", "round", "off")),
    Key("tabletopic.maintenance.equality-deletes.commit-max-rows", KeyType.LONG, 5_000_000,
        "With equality-deletes.convert=commit, the most rows a commit reads to find the rows its deletes remove: "
        "it reads the key columns of the data files whose key bounds may hold a deleted key, on the commit's "
        "path, about 0.1 s per 200,000 rows on one core. When those files hold more, the commit carries "
        "equality deletes, which the next round converts.", minimum=0),
    Key("tabletopic.maintenance.compaction.min-input-files", KeyType.INT, 10,
        "Compact a partition once it holds this many data files smaller than the target file size "
        "(write.target-file-size-bytes).", minimum=2),
    Key("tabletopic.maintenance.compaction.cheap-rewrite-bytes", KeyType.LONG, 64 * 1024 * 1024,
        "Compact every partition holding two or more small data files, whatever min-input-files says, while "
        "those files hold at most this many bytes in all: rewriting that little costs less than every reader "
        "opening each file. A small table then keeps one data file per partition after each look. Each such "
        "look spends a few seconds of Spark on the table however small it is (3 to 5 s for 10 MiB on two "
        "cores), so a connector with hundreds of small tables may want it lower. 0 turns it off.", minimum=0),
    Key("tabletopic.maintenance.compaction.delete-files", KeyType.INT, 8,
        "Compact once this many delete files apply to a data file: the rewrite applies them, and delete files "
        "that no longer apply to any data file are dropped.", minimum=1),
    Key("tabletopic.maintenance.compaction.max-group-bytes", KeyType.LONG, 256 * 1024 * 1024,
        "Input bytes of one rewrite job. Each group commits on its own, so a shutdown loses at most one group's "
        "work and a round waits behind at most one group's tasks.", minimum=1024 * 1024),
    Key("tabletopic.maintenance.snapshots.older-than-ms", KeyType.LONG, 3_600_000,
        "Expire snapshots older than this (AutoMQ's expire.snapshot.older.than.hours). The newest snapshot "
        "holding each connector's offsets is always kept.", minimum=0),
    Key("tabletopic.maintenance.snapshots.retain-last", KeyType.INT, 10,
        "Snapshots always kept, however old (AutoMQ's expire.snapshot.retain.last).", minimum=1),
    Key("tabletopic.maintenance.orphans.older-than-ms", KeyType.LONG, 3 * 86_400_000,
        "Remove files that no snapshot references once they are this old. Written files that wait for their "
        "commit longer than half of this are never committed (their records are read again), so a file on its "
        "way to a snapshot is never removed.", minimum=3_600_000),
    Key("tabletopic.maintenance.orphans.interval-ms", KeyType.LONG, 86_400_000,
        "How often orphan removal lists the table's storage (the costliest step).", minimum=0),
    Key("tabletopic.maintenance.manifests.max-count", KeyType.INT, 50,
        "Rewrite the manifests once the current snapshot has more than this many.", minimum=2),
    Key(CATALOG_PREFIX + "*", KeyType.PREFIX, None,
        "Catalog properties passed to Iceberg (type or catalog-impl, warehouse, uri, io-impl, ...). "
        "Default: type=hadoop with warehouse=file://<working dir>/warehouse."),
    Key(TABLE_PREFIX + "<table>.route-regex", KeyType.PREFIX, None,
        "Static routing: records whose route field matches go to <table>."),
    Key(TABLE_PREFIX + "<table>.id-columns", KeyType.PREFIX, None, "Identifier columns of <table>."),
    Key(TABLE_PREFIX + "<table>.partition-by", KeyType.PREFIX, None, "Partition spec of <table> when auto-created."),
    Key(TABLE_PREFIX + "<table>.commit-branch", KeyType.PREFIX, None, "Branch <table> is committed to."),
    Key(TABLE_PREFIX + "<table>.upsert-mode-enabled", KeyType.PREFIX, None,
        "Upsert mode for <table> alone (true or false); iceberg.tables.upsert-mode-enabled otherwise."),
    Key(TABLE_PREFIX + "<table>.cdc-field", KeyType.PREFIX, None,
        "The change operation's field for <table> alone; iceberg.tables.cdc-field otherwise. An empty value "
        "turns CDC off for <table>."),
    Key(AUTO_CREATE_PREFIX + "*", KeyType.PREFIX, None, "Table properties set on auto-created tables."),
    Key(WRITE_PREFIX + "*", KeyType.PREFIX, None, "Write properties (e.g. write.parquet.compression-codec)."),
    Key(HADOOP_PREFIX + "*", KeyType.PREFIX, None, "Hadoop configuration for the catalog (hadoop.* catalog props)."),
    Key(KAFKA_PREFIX + "*", KeyType.PREFIX, None, "Consumer properties for this connector, as consumer.override.*."),
    Key(CONSUMER_OVERRIDE_PREFIX + "*", KeyType.PREFIX, None,
        "This connector's consumer properties; they win over the worker's (security.*, ssl.*, sasl.* included)."),
    Key(PRODUCER_OVERRIDE_PREFIX + "*", KeyType.PREFIX, None,
        "This connector's producer properties (dead-letter and control topics); they win over the worker's."),
)


@dataclass(frozen=True)
class PluginSpec:
    """A converter or transform: its class name and its own properties."""

    class_name: str
    props: dict[str, str]
    alias: str = ""


@dataclass(frozen=True)
class TableConfig:
    name: str
    route_regex: re.Pattern[str] | None
    id_columns: list[str]
    partition_by: list[PartitionField]
    commit_branch: str | None
    upsert: bool
    cdc_field: str | None

    @property
    def keyed(self) -> bool:
        """Upsert or CDC: the table's rows are replaced and deleted by their id columns."""
        return self.upsert or bool(self.cdc_field)


@dataclass
class ConnectorConfig:
    name: str
    topics: list[str] | None
    topics_regex: re.Pattern[str] | None
    key_converter: PluginSpec
    value_converter: PluginSpec
    transforms: list[PluginSpec]
    tables: list[str] | None
    dynamic_enabled: bool  # tables found as records arrive: by a route field, or by topic (Table Topic mode)
    table_topic_namespace: str | None  # Table Topic mode's namespace; None when it is off
    route_field: str | None
    auto_create: bool
    evolve_schema: bool
    force_optional: bool
    case_insensitive: bool
    upsert_mode: bool
    cdc_field: str | None
    auto_create_props: dict[str, str]
    write_props: dict[str, str]
    commit_interval_ms: int
    commit_timeout_ms: int
    commit_threads: int
    commit_stall_intervals: int
    catalog_max_failures: int
    control_topic: str
    control_group_prefix: str
    catalog_name: str
    catalog: CatalogPlan  # which catalog and storage the keys select; its props are what Iceberg gets
    group_id: str
    errors_tolerance: str
    dlq_topic: str | None
    dlq_context_headers: bool
    errors_log_enable: bool
    errors_log_include_messages: bool
    max_value_bytes: int
    buffer_flush_bytes: int
    buffer_max_bytes: int
    offsets_refresh_rounds: int
    maintenance: MaintenanceSettings
    consumer_overrides: dict[str, str]
    producer_overrides: dict[str, str]
    raw: dict[str, str]  # resolved: config provider placeholders replaced; holds secrets
    written: dict[str, str]  # as written, placeholders kept: what may be shown
    warnings: list[str] = field(default_factory=list)
    _tables: dict[str, TableConfig] = field(default_factory=dict, repr=False)

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
            )
        return self._tables[name]

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


def available_plugins(group: str) -> dict[str, Any]:
    return {ep.name: ep for ep in entry_points(group=group)}


def _plugin(props: Mapping[str, str], key: str, default: str, worker: WorkerConfig, out: Parsed) -> PluginSpec:
    class_name = props.get(key) or default
    known = available_plugins(CONVERTER_GROUP)
    if class_name not in known:
        out.problems.append(Problem(key, class_name, f"unknown converter; available: {', '.join(sorted(known))}"))
    # Connect lets the worker's converter settings apply when the connector names the same converter.
    own = {**(prefixed(worker.raw, key + ".") if not props.get(key) else {}), **prefixed(props, key + ".")}
    if class_name in REGISTRY_CONVERTERS and not own.get("schema.registry.url"):
        if worker.registry_listeners:
            # The daemon's own registry: its login and its very certificate, whatever name it carries.
            own["schema.registry.url"] = builtin_registry_url(worker.registry_listeners[0])
            security = worker.registry_security
            if security.own_login() and not own.get("basic.auth.user.info"):
                own["basic.auth.user.info"] = security.own_login() or ""
            if security.trust_pem:
                own["schema.registry.ssl.truststore.certificates"] = security.trust_pem
                own["schema.registry.ssl.endpoint.identification.algorithm"] = ""
        else:
            out.problems.append(Problem(f"{key}.schema.registry.url", None, f"{class_name} needs a Schema Registry: "
                                        "set this key, or schema.registry.listeners in the worker file to use the "
                                        "built-in one"))
    if NESTING_DEPTH_KEY in own:
        try:
            nesting_limit(own)
        except ValueError as exc:
            out.problems.append(Problem(f"{key}.{NESTING_DEPTH_KEY}", own[NESTING_DEPTH_KEY], str(exc)))
    return PluginSpec(class_name, own)


def _transforms(props: Mapping[str, str], aliases: list[str], out: Parsed) -> list[PluginSpec]:
    known = available_plugins(TRANSFORM_GROUP)
    specs = []
    for alias in aliases:
        type_key = f"transforms.{alias}.type"
        class_name = props.get(type_key)
        if not class_name:
            out.problems.append(Problem(type_key, None, f"is required for the transform alias {alias!r}"))
            continue
        if class_name not in known:
            out.problems.append(Problem(type_key, class_name,
                                        f"unknown transform; available: {', '.join(sorted(known)) or 'none'}"))
            continue
        own = prefixed(props, f"transforms.{alias}.")
        own.pop("type", None)
        specs.append(PluginSpec(class_name, own, alias))
    return specs


def _catalog_props(props: Mapping[str, str]) -> dict[str, str]:
    catalog = prefixed(props, CATALOG_PREFIX)
    if not catalog:
        catalog = {"type": "hadoop", "warehouse": "file://" + os.path.abspath("warehouse")}
    for key, value in prefixed(props, HADOOP_PREFIX).items():
        catalog.setdefault(f"hadoop.{key}", value)
    return catalog


_ALIASES = aliases(CONNECTOR_KEYS)


def _check_unknown(props: Mapping[str, str], out: Parsed) -> None:
    prefixes = (CATALOG_PREFIX, HADOOP_PREFIX, AUTO_CREATE_PREFIX, WRITE_PREFIX, KAFKA_PREFIX,
                CONSUMER_OVERRIDE_PREFIX, PRODUCER_OVERRIDE_PREFIX)
    for key in props:
        if key in CONNECTOR_KEYS or key in _ALIASES or key.startswith(prefixes):
            continue
        if key.startswith(TABLE_PREFIX):
            if key.rsplit(".", 1)[-1] not in TABLE_KEYS:
                out.warnings.append(f"unknown key {key!r} ignored (per-table keys are {', '.join(TABLE_KEYS)})")
            continue
        if key.startswith(("iceberg.", "tabletopic.")):
            out.warnings.append(f"unknown key {key!r} ignored")


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
            message = _partition_by_problem(value)
            if message:
                out.problems.append(Problem(key, value, message))
        if key.startswith(TABLE_PREFIX) and key.endswith(".upsert-mode-enabled"):
            parse_value(Key(key, KeyType.BOOLEAN, False, ""), value, out)  # told as any boolean key is
    for name in tables or []:
        own = prefixed(props, f"{TABLE_PREFIX}{name}.")
        upsert, cdc = _change_keys(own, values["iceberg.tables.upsert-mode-enabled"],
                                   values["iceberg.tables.cdc-field"])
        if (upsert or cdc) and not own.get("id-columns", props.get("iceberg.tables.default-id-columns")):
            out.problems.append(Problem("iceberg.tables.default-id-columns", None,
                                        f"upsert and CDC need id columns; none are set for table {name}"))


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
    _check_unknown(props, out)
    round_ms = values["iceberg.control.commit.interval-ms"] + values["iceberg.control.commit.timeout-ms"]
    if values["tabletopic.maintenance.orphans.older-than-ms"] < 6 * round_ms:
        out.problems.append(Problem("tabletopic.maintenance.orphans.older-than-ms",
                                    values["tabletopic.maintenance.orphans.older-than-ms"],
                                    f"must be at least 6 commit rounds ({6 * round_ms} ms): files wait up to half "
                                    "of it for their commit"))
    if values["errors.deadletterqueue.topic.name"] and values["errors.tolerance"] != "all":
        out.warnings.append("errors.deadletterqueue.topic.name is set but errors.tolerance=none: "
                            "failed records stop the connector and never reach the dead-letter topic")
    key_conv = _plugin(props, "key.converter", worker.key_converter, worker, out)
    value_conv = _plugin(props, "value.converter", worker.value_converter, worker, out)
    transforms = _transforms(props, values["transforms"], out)
    overrides = {**prefixed(props, KAFKA_PREFIX), **prefixed(props, CONSUMER_OVERRIDE_PREFIX)}
    producer_overrides = prefixed(props, PRODUCER_OVERRIDE_PREFIX)
    clients = KafkaClients(worker.bootstrap_servers, worker.raw).for_connector(overrides, producer_overrides)
    for role in ("consumer", "producer"):
        why = security_problem(clients.props(role))
        if why is not None:
            out.problems.append(Problem(f"{role}.override security", None, why))
    catalog = plan_catalog(_catalog_props(props), worker.spark_conf.get("spark.jars", ""))
    out.problems.extend(Problem("iceberg.catalog.*", None, why) for why in catalog.problems)
    if out.problems:
        raise ConfigError(out.problems, f"connector {props.get('name', '<unnamed>')!r}")
    table_topic = bool(values["tabletopic.table-topic.enabled"])  # a topic becomes a table, as it is and as it changes
    return ConnectorConfig(
        name=values["name"],
        topics=values["topics"],
        topics_regex=values["topics.regex"],
        key_converter=key_conv,
        value_converter=value_conv,
        transforms=transforms,
        tables=values["iceberg.tables"],
        dynamic_enabled=values["iceberg.tables.dynamic-enabled"] or table_topic,
        table_topic_namespace=values["tabletopic.table-topic.namespace"] if table_topic else None,
        route_field=values["iceberg.tables.route-field"],
        auto_create=values["iceberg.tables.auto-create-enabled"] or table_topic,
        evolve_schema=values["iceberg.tables.evolve-schema-enabled"] or table_topic,
        force_optional=values["iceberg.tables.schema-force-optional"],
        case_insensitive=values["iceberg.tables.schema-case-insensitive"],
        upsert_mode=values["iceberg.tables.upsert-mode-enabled"],
        cdc_field=values["iceberg.tables.cdc-field"],
        auto_create_props=prefixed(props, AUTO_CREATE_PREFIX),
        write_props=prefixed(props, WRITE_PREFIX),
        commit_interval_ms=values["iceberg.control.commit.interval-ms"],
        commit_timeout_ms=values["iceberg.control.commit.timeout-ms"],
        commit_threads=values["iceberg.control.commit.threads"],
        commit_stall_intervals=values["tabletopic.commit.stall-intervals"],
        catalog_max_failures=values["tabletopic.catalog.max-consecutive-failures"],
        control_topic=values["iceberg.control.topic"],
        control_group_prefix=values["iceberg.control.group-id-prefix"],
        catalog_name=values["iceberg.catalog"],
        catalog=catalog,
        group_id=values["iceberg.connect.group-id"] or f"connect-{values['name']}",
        errors_tolerance=values["errors.tolerance"],
        dlq_topic=values["errors.deadletterqueue.topic.name"],
        dlq_context_headers=values["errors.deadletterqueue.context.headers.enable"],
        errors_log_enable=values["errors.log.enable"],
        errors_log_include_messages=values["errors.log.include.messages"],
        max_value_bytes=values["tabletopic.input.max-value-bytes"],
        buffer_flush_bytes=values["tabletopic.buffer.flush-bytes"],
        buffer_max_bytes=values["tabletopic.buffer.max-bytes"],
        offsets_refresh_rounds=values["tabletopic.offsets.refresh-rounds"],
        maintenance=settings_from(values),
        consumer_overrides=overrides,
        producer_overrides=producer_overrides,
        raw=props,
        written=written,
        warnings=out.warnings,
    )
