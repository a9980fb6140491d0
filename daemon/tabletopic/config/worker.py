"""The worker configuration: the process-wide keys of ``connect-standalone``'s worker file."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from tabletopic.config.definition import ConfigError, Key, KeyType, Parsed, Problem, parse_keys, prefixed
from tabletopic.registry.avro_compatibility import LEVELS

JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"


def _listeners_problem(value: list[str]) -> str | None:
    for url in value:
        parsed = urlparse(url)
        if parsed.scheme != "http" or parsed.port is None:
            return "each listener must look like http://HOST:PORT"
    return None


def _registry_listener_problem(value: list[str]) -> str | None:
    if len(value) > 1:
        return "the built-in Schema Registry takes one listener"
    for url in value:
        parsed = urlparse(url)
        if parsed.scheme != "http" or not parsed.port:
            return "the listener must look like http://HOST:PORT, with a port other than 0 (converters are told it)"
    return None


def builtin_registry_url(listener: str) -> str:
    """Where this process reaches its own registry: a wildcard bind is reached on loopback."""
    parsed = urlparse(listener)
    host = parsed.hostname or "127.0.0.1"
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    return f"http://{host}:{parsed.port}"


def _bootstrap_problem(value: list[str]) -> str | None:
    for server in value:
        host, _, port = server.rpartition(":")
        if not host or not port.isdigit():
            return "each server must look like HOST:PORT"
    return None


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
    Key("consumer.session.timeout.ms", KeyType.INT, 10_000, "Consumer group session timeout.", minimum=1000),
    Key("consumer.heartbeat.interval.ms", KeyType.INT, 2_000, "Consumer group heartbeat interval.", minimum=100),
    Key("consumer.auto.offset.reset", KeyType.STRING, "earliest",
        "Where to start a partition that no table and no group offset knows.", allowed=("earliest", "latest")),
    Key("consumer.max.poll.records", KeyType.INT, 2000, "Most records one fetch hands to the sink.", minimum=1),
    Key("task.shutdown.graceful.timeout.ms", KeyType.INT, 60_000,
        "How long a graceful shutdown may take to commit what is buffered.", minimum=1000),
    Key("offset.storage.file.filename", KeyType.STRING, None,
        "Accepted for compatibility and ignored: offsets live in the Iceberg tables."),
    Key("plugin.path", KeyType.STRING, None, "Accepted for compatibility and ignored: plugins are entry points."),
    Key("schema.registry.listeners", KeyType.LIST, [],
        "Serve the built-in Schema Registry (Confluent's REST API) here, e.g. http://127.0.0.1:8081. Empty: off. "
        "AvroConverters without schema.registry.url then use it.", validator=_registry_listener_problem),
    Key("schema.registry.topic", KeyType.STRING, "_schemas",
        "The compacted topic that holds the built-in registry's schemas; daemons sharing it share schemas."),
    Key("schema.registry.compatibility", KeyType.STRING, "BACKWARD",
        "The built-in registry's default compatibility level, until PUT /config changes it.",
        allowed=LEVELS),
    Key("spark.*", KeyType.PREFIX, None, "Passed to the SparkSession (spark.master, spark.driver.memory, ...)."),
    Key("consumer.*", KeyType.PREFIX, None, "Other Kafka consumer properties for every connector."),
)}


@dataclass(frozen=True)
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
    shutdown_timeout_ms: int
    registry_listeners: list[str]
    registry_topic: str
    registry_compatibility: str
    spark_conf: dict[str, str]
    consumer_props: dict[str, str]
    raw: dict[str, str]
    warnings: tuple[str, ...] = ()


def parse_worker(props: Mapping[str, Any]) -> WorkerConfig:
    props = {str(k): str(v) for k, v in props.items() if v is not None}
    out = Parsed()
    parse_keys(WORKER_KEYS, props, out)
    if "listeners" in props and not props["listeners"].strip():
        out.values["listeners"] = []
    for key in props:
        bare = key.removeprefix("consumer.")
        if bare.startswith(("security.", "sasl.", "ssl.")) and props[key] not in ("", "PLAINTEXT"):
            # Refused rather than ignored: dropping it would connect without the security asked for.
            out.problems.append(Problem(key, props[key], "Kafka TLS/SASL settings are not supported yet; "
                                        "tabletopic connects over PLAINTEXT only"))
        if key.startswith(("iceberg.", "tabletopic.")):
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
        shutdown_timeout_ms=v["task.shutdown.graceful.timeout.ms"],
        registry_listeners=v["schema.registry.listeners"],
        registry_topic=v["schema.registry.topic"],
        registry_compatibility=v["schema.registry.compatibility"],
        spark_conf={f"spark.{k}": val for k, val in prefixed(props, "spark.").items()},
        consumer_props={k: val for k, val in prefixed(props, "consumer.").items()
                        if f"consumer.{k}" not in WORKER_KEYS},
        raw=props,
        warnings=tuple(out.warnings),
    )

