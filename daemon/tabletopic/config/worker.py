"""The worker configuration: the process-wide keys of ``connect-standalone``'s worker file."""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from tabletopic.config.definition import ConfigError, Key, KeyType, Parsed, Problem, parse_keys, prefixed
from tabletopic.config.providers import Providers
from tabletopic.core.listener_security import ListenerSecurity, listener_security
from tabletopic.kafka.clients import ROLES, security_problem
from tabletopic.observe.secrets import Scrubber, redacted_repr
from tabletopic.registry.compatibility_levels import LEVELS

JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"


def _listeners_problem(value: list[str]) -> str | None:
    for url in value:
        parsed = urlparse(url)
        if parsed.scheme not in ("http", "https") or parsed.port is None:
            return "each listener must look like http://HOST:PORT or https://HOST:PORT"
    return None


def _registry_listener_problem(value: list[str]) -> str | None:
    if len(value) > 1:
        return "the built-in Schema Registry takes one listener"
    for url in value:
        parsed = urlparse(url)
        if parsed.scheme not in ("http", "https") or not parsed.port:
            return ("the listener must look like http(s)://HOST:PORT, with a port other than 0 (converters are "
                    "told it)")
    return None


def builtin_registry_url(listener: str) -> str:
    """Where this process reaches its own registry: a wildcard bind is reached on loopback."""
    parsed = urlparse(listener)
    host = parsed.hostname or "127.0.0.1"
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    return f"{parsed.scheme}://{host}:{parsed.port}"


def _bootstrap_problem(value: list[str]) -> str | None:
    for server in value:
        host, _, port = server.rpartition(":")
        if not host or not port.isdigit():
            return "each server must look like HOST:PORT"
    return None


_STORE_TYPE = "PEM, PKCS12 or JKS; unset: from the file's suffix (JKS otherwise)."


def _listener_keys(tls: str, auth: str, what: str, basic: str) -> tuple[Key, ...]:
    """The TLS and authentication keys of one listener (see core/listener_security.py)."""
    return (
        Key(f"{tls}keystore.location", KeyType.STRING, None, f"Certificate and key when {what} is https://."),
        Key(f"{tls}keystore.type", KeyType.STRING, None, _STORE_TYPE),
        Key(f"{tls}keystore.password", KeyType.PASSWORD, None, "Password of that keystore."),
        Key(f"{tls}key.password", KeyType.PASSWORD, None, "Password of an encrypted PEM key."),
        Key(f"{auth}authentication.method", KeyType.STRING, "NONE", f"BASIC: {basic}.", allowed=("NONE", "BASIC")),
        Key(f"{auth}authentication.credentials.file", KeyType.STRING, None,
            f"The users of {what}, one 'user: password' line each (Connect's PropertyFileLoginModule format)."),
    )


WORKER_KEYS: dict[str, Key] = {k.name: k for k in (
    Key("bootstrap.servers", KeyType.LIST, ["localhost:9092"], "Kafka brokers, HOST:PORT, comma-separated.",
        validator=_bootstrap_problem),
    Key("key.converter", KeyType.STRING, JSON_CONVERTER, "Default converter class for record keys."),
    Key("value.converter", KeyType.STRING, JSON_CONVERTER, "Default converter class for record values."),
    Key("listeners", KeyType.LIST, ["http://127.0.0.1:8083"],
        "HTTP listener for /health, /ready and /metrics (and Connect's REST API)."
        " An empty value turns it off.", validator=_listeners_problem),
    Key("log.level", KeyType.STRING, "INFO", "Log level.", allowed=("DEBUG", "INFO", "WARNING", "ERROR")),
    Key("log.format", KeyType.STRING, "auto", "json, console, or auto (console on a terminal, else JSON lines).",
        allowed=("auto", "json", "console")),
    Key("consumer.session.timeout.ms", KeyType.INT, 10_000,
        "Consumer group session timeout. At each rebalance a connector reads where its new partitions start "
        "from its tables' snapshots, and the consumer sends no heartbeat until that read ends: keep this above "
        "the time the catalog takes to answer then, or the broker drops the member and the group rebalances "
        "again.", minimum=1000),
    Key("consumer.heartbeat.interval.ms", KeyType.INT, 2_000, "Consumer group heartbeat interval.", minimum=100),
    Key("consumer.auto.offset.reset", KeyType.STRING, "earliest",
        "Where to start a partition that no table and no group offset knows.", allowed=("earliest", "latest")),
    Key("consumer.max.poll.records", KeyType.INT, 10_000,
        "Most records one fetch hands to the sink. Each batch has fixed costs (a parser call, a routing "
        "step, a buffer append per partition), so small batches cost CPU per record.", minimum=1),
    Key("consumer.fetch.min.bytes", KeyType.INT, 1 << 20,
        "Bytes a fetch waits for (up to consumer.fetch.max.wait.ms) before the broker answers it. Each fetch "
        "costs the sink and the broker the same whatever it holds, so under load fewer, larger fetches "
        "leave more of the cores to the records; a connector's consumer.override.fetch.min.bytes wins. "
        "Kafka's own default is 1.", minimum=1),
    Key("consumer.fetch.max.wait.ms", KeyType.INT, 500,
        "Longest the broker holds a fetch for consumer.fetch.min.bytes: how much later a record on a quiet "
        "topic can reach the sink, and how often quiet partitions are fetched. Every fetch names every "
        "assigned partition, so with many quiet ones a shorter wait costs the sink and the broker CPU: "
        "idle with 1,000 partitions, 250 took 0.39 of a core between them, 500 took 0.25. A connector's "
        "consumer.override.fetch.max.wait.ms wins. Kafka's own default is 500.", minimum=0),
    Key("task.shutdown.graceful.timeout.ms", KeyType.INT, 60_000,
        "How long a graceful shutdown may take to commit what is buffered.", minimum=1000),
    Key("offset.storage.file.filename", KeyType.STRING, None,
        "Accepted for compatibility and ignored: offsets live in the Iceberg tables."),
    Key("plugin.path", KeyType.STRING, None, "Accepted for compatibility and ignored: plugins are entry points."),
    Key("schema.registry.listeners", KeyType.LIST, [],
        "Serve the built-in Schema Registry (Confluent's REST API) here, e.g. http://127.0.0.1:8081. Empty: off. "
        "Avro, Protobuf and JSON Schema converters without schema.registry.url then use it.",
        validator=_registry_listener_problem),
    Key("schema.registry.topic", KeyType.STRING, "_schemas",
        "The compacted topic that holds the built-in registry's schemas; daemons sharing it share schemas."),
    Key("schema.registry.compatibility", KeyType.STRING, "BACKWARD",
        "The built-in registry's default compatibility level, until PUT /config changes it.",
        allowed=LEVELS),
    Key("security.protocol", KeyType.STRING, "PLAINTEXT", "How every Kafka client connects.",
        allowed=("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")),
    Key("ssl.truststore.location", KeyType.STRING, None,
        "CA certificates that sign the brokers' certificates (PEM, PKCS12 or JKS). Unset: the system's."),
    Key("ssl.truststore.type", KeyType.STRING, None, _STORE_TYPE),
    Key("ssl.truststore.password", KeyType.PASSWORD, None, "Password of a PKCS12 or JKS truststore."),
    Key("ssl.keystore.location", KeyType.STRING, None,
        "Client certificate and key for mutual TLS (PEM, PKCS12 or JKS)."),
    Key("ssl.keystore.type", KeyType.STRING, None, _STORE_TYPE),
    Key("ssl.keystore.password", KeyType.PASSWORD, None, "Password of the keystore."),
    Key("ssl.key.password", KeyType.PASSWORD, None, "Password of an encrypted PEM private key."),
    Key("ssl.endpoint.identification.algorithm", KeyType.STRING, "https",
        "https checks that the broker's certificate names its host; empty turns the check off."),
    Key("sasl.mechanism", KeyType.STRING, "GSSAPI",
        "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER (client credentials); GSSAPI is not supported."),
    Key("sasl.oauthbearer.token.endpoint.url", KeyType.STRING, None,
        "OAUTHBEARER: the OAuth token endpoint; the JAAS line of OAuthBearerLoginModule gives clientId, "
        "clientSecret and an optional scope."),
    Key("sasl.jaas.config", KeyType.PASSWORD, None,
        'Kafka\'s JAAS line: org.apache.kafka.common.security.scram.ScramLoginModule required username="..." '
        'password="...";'),
    Key("config.providers", KeyType.STRING, None,
        "Config providers by name (file, env, dir), resolving ${name:...} in worker and connector files."),
    Key("config.providers.*", KeyType.PREFIX, None,
        "config.providers.<name>.class: FileConfigProvider, EnvVarConfigProvider or DirectoryConfigProvider "
        "(org.apache.kafka.common.config.provider)."),
    *_listener_keys("listeners.https.ssl.", "rest.", "the HTTP listener",
                    "every path of the HTTP listener but /health needs HTTP Basic credentials"),
    *_listener_keys("schema.registry.ssl.", "schema.registry.", "the built-in registry",
                    "the built-in registry needs HTTP Basic credentials (its converters in this daemon use the "
                    "first user of the file)"),
    Key("group.id", KeyType.STRING, None,
        "Distributed mode: the cluster. Workers with the same group.id share their connectors. Required by "
        "tabletopic distributed."),
    Key("config.storage.topic", KeyType.STRING, None,
        "Distributed mode: the compacted topic holding connector configurations and target states. Required by "
        "tabletopic distributed."),
    Key("status.storage.topic", KeyType.STRING, None,
        "Distributed mode: the compacted topic where each worker publishes its tasks' states. Required by "
        "tabletopic distributed."),
    Key("offset.storage.topic", KeyType.STRING, None,
        "Accepted for compatibility and ignored: a sink's offsets live in its Iceberg tables."),
    Key("config.storage.replication.factor", KeyType.INT, 3,
        "Replication factor of the config topic when it is created (Connect's default; 1 for a one-broker "
        "cluster).", minimum=1),
    Key("status.storage.replication.factor", KeyType.INT, 3,
        "Replication factor of the status topic when it is created.", minimum=1),
    Key("rest.advertised.host.name", KeyType.STRING, None,
        "The host this worker's REST API is reached at, and its worker_id; default: the listener's host, or "
        "this machine's name when it listens on every address."),
    Key("rest.advertised.port", KeyType.INT, None, "The port of that address; default: the listener's port.",
        minimum=1),
    Key("tabletopic.exit-on-connector-failure", KeyType.BOOLEAN, False,
        "false: a failed connector is FAILED in its status (with the reason as its trace), /ready answers 503, "
        "and the other connectors go on, as in Kafka Connect; POST /connectors/<name>/restart starts it again. "
        "true: the daemon stops (exit 1, or 69/78 for what a restart may fix or not) so that systemd or "
        "Kubernetes restarts it."),
    Key("tabletopic.spark.lake-jars", KeyType.BOOLEAN, False,
        "Load the S3, REST and Glue catalog jars when the JVM starts even if no connector it starts with needs "
        "them, so that connectors created later over REST can use them (the JVM cannot load jars later)."),
    Key("tabletopic.spark.class-archive", KeyType.BOOLEAN, True,
        "true: the Spark JVM maps the classes an earlier start archived (Java's class data sharing), which took "
        "its CPU at a start from 13.5 to 7.4 s in bench/jvm_start.py; the first start writes the archive as its "
        "JVM exits, under TABLETOPIC_CACHE_DIR (default ~/.cache/tabletopic). false: every start reads its "
        "classes from the jars."),
    Key("spark.*", KeyType.PREFIX, None, "Passed to the SparkSession (spark.master, spark.driver.memory, ...)."),
    Key("consumer.*", KeyType.PREFIX, None,
        "Other Kafka consumer properties for every connector; consumer.security.*, consumer.ssl.* and "
        "consumer.sasl.* narrow the security keys to consumers."),
    Key("producer.*", KeyType.PREFIX, None, "producer.security.*, producer.ssl.*, producer.sasl.*: for producers."),
    Key("admin.*", KeyType.PREFIX, None, "admin.security.*, admin.ssl.*, admin.sasl.*: for admin clients."),
)}


@dataclass(frozen=True, repr=False)
class WorkerConfig:
    bootstrap_servers: list[str]
    key_converter: str
    value_converter: str
    listeners: list[str]
    log_level: str
    log_format: str
    session_timeout_ms: int
    heartbeat_interval_ms: int
    auto_offset_reset: str
    max_poll_records: int
    fetch_min_bytes: int
    fetch_max_wait_ms: int
    shutdown_timeout_ms: int
    registry_listeners: list[str]
    registry_topic: str
    registry_compatibility: str
    spark_conf: dict[str, str]
    consumer_props: dict[str, str]
    raw: dict[str, str] = field(repr=False)  # resolved: config provider placeholders replaced; holds secrets
    written: dict[str, str]  # as written, placeholders kept: what may be shown
    providers: Providers
    scrubber: Scrubber
    rest_security: ListenerSecurity
    registry_security: ListenerSecurity
    exit_on_connector_failure: bool = False
    lake_jars: bool = False
    class_archive: bool = True
    group_id: str | None = None
    config_topic: str | None = None
    status_topic: str | None = None
    config_replication: int = 3
    status_replication: int = 3
    advertised_host: str | None = None
    advertised_port: int | None = None
    warnings: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return redacted_repr(self)  # it holds secrets: shown as a response shows them


def parse_worker(props: Mapping[str, Any]) -> WorkerConfig:
    written = {str(k): str(v) for k, v in props.items() if v is not None}
    out = Parsed()
    providers = Providers.from_worker(written, out.problems)
    props = providers.resolve(written, out.problems)
    scrubber = Scrubber()
    scrubber.learn(props)
    parse_keys(WORKER_KEYS, props, out)
    if "listeners" in props and not props["listeners"].strip():
        out.values["listeners"] = []
    security = {k: v for k, v in props.items() if k.startswith(("security.", "ssl.", "sasl."))}
    for role in ROLES:
        narrowed = {**security, **{k.removeprefix(role + "."): v for k, v in props.items()
                                   if k.startswith(tuple(f"{role}.{p}" for p in ("security.", "ssl.", "sasl.")))}}
        why = security_problem(narrowed)
        if why is not None:
            out.problems.append(Problem(f"{role} security", None, why))
            break
    securities = {}
    for name, listeners, tls, auth in (("rest", "listeners", "listeners.https.ssl.", "rest."),
                                       ("registry", "schema.registry.listeners", "schema.registry.ssl.",
                                        "schema.registry.")):
        urls = out.values.get(listeners) or []
        try:
            securities[name] = listener_security(props, urls[0] if urls else "", tls, auth)
        except (ValueError, ssl.SSLError) as exc:
            out.problems.append(Problem(listeners, None, str(exc)))
            securities[name] = ListenerSecurity()
    for key in props:
        if key.startswith(("iceberg.", "tabletopic.")) and key not in WORKER_KEYS:
            out.warnings.append(f"{key!r} belongs in the connector configuration; ignored in the worker file")
    if out.problems:
        raise ConfigError(out.problems, "worker configuration")
    v = out.values
    return WorkerConfig(
        bootstrap_servers=v["bootstrap.servers"],
        key_converter=v["key.converter"],
        value_converter=v["value.converter"],
        listeners=v["listeners"],
        log_level=v["log.level"],
        log_format=v["log.format"],
        session_timeout_ms=v["consumer.session.timeout.ms"],
        heartbeat_interval_ms=v["consumer.heartbeat.interval.ms"],
        auto_offset_reset=v["consumer.auto.offset.reset"],
        max_poll_records=v["consumer.max.poll.records"],
        fetch_min_bytes=v["consumer.fetch.min.bytes"],
        fetch_max_wait_ms=v["consumer.fetch.max.wait.ms"],
        shutdown_timeout_ms=v["task.shutdown.graceful.timeout.ms"],
        registry_listeners=v["schema.registry.listeners"],
        registry_topic=v["schema.registry.topic"],
        registry_compatibility=v["schema.registry.compatibility"],
        spark_conf={f"spark.{k}": val for k, val in prefixed(props, "spark.").items()},
        consumer_props={k: val for k, val in prefixed(props, "consumer.").items()
                        if f"consumer.{k}" not in WORKER_KEYS and not k.startswith(("security.", "ssl.", "sasl."))},
        raw=props,
        written=written,
        providers=providers,
        scrubber=scrubber,
        rest_security=securities["rest"],
        registry_security=securities["registry"],
        exit_on_connector_failure=v["tabletopic.exit-on-connector-failure"],
        lake_jars=v["tabletopic.spark.lake-jars"],
        class_archive=v["tabletopic.spark.class-archive"],
        group_id=v["group.id"],
        config_topic=v["config.storage.topic"],
        status_topic=v["status.storage.topic"],
        config_replication=v["config.storage.replication.factor"],
        status_replication=v["status.storage.replication.factor"],
        advertised_host=v["rest.advertised.host.name"],
        advertised_port=v["rest.advertised.port"],
        warnings=tuple(out.warnings),
    )



def distributed_problems(worker: WorkerConfig) -> list[Problem]:
    """What ``tabletopic distributed`` needs beyond a standalone worker file, as Connect's distributed mode."""
    problems = []
    for key, value in (("group.id", worker.group_id), ("config.storage.topic", worker.config_topic),
                       ("status.storage.topic", worker.status_topic)):
        if not value:
            problems.append(Problem(key, None, "is required in distributed mode"))
    if worker.config_topic and worker.config_topic == worker.status_topic:
        problems.append(Problem("status.storage.topic", worker.status_topic, "must differ from config.storage.topic"))
    return problems


def offset_reset(worker: WorkerConfig, consumer_overrides: Mapping[str, str]) -> str:
    """A connector's ``auto.offset.reset``: its ``consumer.override.*`` first, then the worker's."""
    return {**worker.consumer_props, **consumer_overrides}.get("auto.offset.reset", worker.auto_offset_reset)
