"""A connector's converters, transforms and predicates: which class each key names (by Connect's class
name, simple name or alias), found by entry point, and its own properties, including the built-in
registry's address and login where a converter needs a registry."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tabletopic.config.connector_keys import CONVERTER_GROUP, PREDICATE_GROUP, REGISTRY_CONVERTERS, TRANSFORM_GROUP
from tabletopic.config.definition import Parsed, Problem, prefixed, unknown_key
from tabletopic.config.input_limits import NESTING_DEPTH_KEY, nesting_limit
from tabletopic.config.plugin_names import available_plugins, resolve
from tabletopic.config.worker import WorkerConfig, builtin_registry_url
from tabletopic.observe.secrets import redacted_repr


@dataclass(frozen=True, repr=False)
class PluginSpec:
    """A converter, transform or predicate: its class name, its own properties, and for a transform the
    predicate that picks the records it applies to (``transforms.<alias>.predicate``, ``.negate``)."""

    class_name: str
    props: dict[str, str]  # a registry converter's basic.auth.user.info too
    alias: str = ""
    predicate: str | None = None
    negate: bool = False

    def __repr__(self) -> str:
        return redacted_repr(self)


def converter_spec(props: Mapping[str, str], key: str, default: str, worker: WorkerConfig, out: Parsed) -> PluginSpec:
    named = props.get(key) or default
    class_name = resolve(CONVERTER_GROUP, named) or named
    if class_name not in available_plugins(CONVERTER_GROUP):
        known = available_plugins(CONVERTER_GROUP)
        out.problems.append(Problem(key, named, f"unknown converter; available: {', '.join(sorted(known))}"))
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


def transform_specs(props: Mapping[str, str], aliases: list[str], predicates: list[PluginSpec],
                    out: Parsed, table_topic: bool = False) -> list[PluginSpec]:
    """The ``transforms``, each with its class, its own keys, and its predicate, which must be one of
    ``predicates``; each is configured once here, so that a bad setting is a problem now. In Table Topic mode
    (``table_topic``) a transform that gives records another topic is refused: each table is named after
    the topic its records were read from."""
    specs = []
    known_predicates = {p.alias for p in predicates}
    for alias in aliases:
        spec = _plugin_spec(props, "transforms", alias, TRANSFORM_GROUP, "transform", out)
        if spec is None:
            continue
        predicate = spec.props.pop("predicate", None) or None
        negate_text = spec.props.pop("negate", "false").strip().lower()
        if negate_text not in ("true", "false"):
            out.problems.append(Problem(f"transforms.{alias}.negate", negate_text, "must be true or false"))
        if predicate is not None and predicate not in known_predicates:
            out.problems.append(Problem(f"transforms.{alias}.predicate", predicate,
                                        f"names no predicate of predicates ({', '.join(sorted(known_predicates))})"
                                        if known_predicates else "names a predicate, but predicates lists none"))
        if predicate is None and negate_text == "true":
            out.problems.append(Problem(f"transforms.{alias}.negate", "true", "needs transforms.<alias>.predicate"))
        spec = PluginSpec(spec.class_name, spec.props, alias, predicate, negate_text == "true")
        transform = _check_configures(TRANSFORM_GROUP, spec, f"transforms.{alias}", out)
        if table_topic and getattr(transform, "changes_topic", False):
            out.problems.append(Problem(f"transforms.{alias}.type", props.get(f"transforms.{alias}.type"),
                                        "gives records another topic, but Table Topic mode names each table after "
                                        "the topic its records were read from; route by a field instead "
                                        "(iceberg.tables.dynamic-enabled with iceberg.tables.route-field)"))
        specs.append(spec)
    return specs


def predicate_specs(props: Mapping[str, str], aliases: list[str], out: Parsed) -> list[PluginSpec]:
    """The ``predicates``, each with its class and its own keys, configured once here."""
    specs = []
    for alias in aliases:
        spec = _plugin_spec(props, "predicates", alias, PREDICATE_GROUP, "predicate", out)
        if spec is not None:
            _check_configures(PREDICATE_GROUP, spec, f"predicates.{alias}", out)
            specs.append(spec)
    return specs


def _plugin_spec(props: Mapping[str, str], family: str, alias: str, group: str, kind: str,
                 out: Parsed) -> PluginSpec | None:
    type_key = f"{family}.{alias}.type"
    named = props.get(type_key)
    if not named:
        out.problems.append(Problem(type_key, None, f"is required for the {kind} alias {alias!r}"))
        return None
    class_name = resolve(group, named)
    if class_name is None:
        known = sorted(available_plugins(group))
        out.problems.append(Problem(type_key, named, f"unknown {kind}; available: {', '.join(known) or 'none'} "
                                                     "(or their simple names and aliases, as Connect takes them)"))
        return None
    own = prefixed(props, f"{family}.{alias}.")
    own.pop("type", None)
    return PluginSpec(class_name, own, alias)


def _check_configures(group: str, spec: PluginSpec, prefix: str, out: Parsed) -> Any:
    """Configure the plugin once: what it refuses is a problem of its keys (Connect checks them too), and a
    key it does not read is told, with the key it may misspell. Returns the plugin, configured, or None."""
    plugin = available_plugins(group)[spec.class_name].load()()
    try:
        plugin.configure(spec.props)
    except (ValueError, KeyError, TypeError) as exc:
        out.problems.append(Problem(f"{prefix}.*", spec.class_name, str(exc)))
        return None
    known = getattr(plugin, "keys", None)
    if known is not None:
        for key in spec.props:
            if key not in known:
                out.warnings.append(unknown_key(f"{prefix}.{key}", [f"{prefix}.{k}" for k in known],
                                                f" ({spec.class_name.rsplit('.', 1)[-1]} does not read it)"))
    return plugin
