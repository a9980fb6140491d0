"""A connector's converters and transforms: which class each key names, found by entry point, and its own
properties, including the built-in registry's address and login where a converter needs a registry."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from tabletopic.config.connector_keys import CONVERTER_GROUP, REGISTRY_CONVERTERS, TRANSFORM_GROUP
from tabletopic.config.definition import Parsed, Problem, prefixed
from tabletopic.config.input_limits import NESTING_DEPTH_KEY, nesting_limit
from tabletopic.config.worker import WorkerConfig, builtin_registry_url


@dataclass(frozen=True)
class PluginSpec:
    """A converter or transform: its class name and its own properties."""

    class_name: str
    props: dict[str, str]
    alias: str = ""


def available_plugins(group: str) -> dict[str, Any]:
    return {ep.name: ep for ep in entry_points(group=group)}


def converter_spec(props: Mapping[str, str], key: str, default: str, worker: WorkerConfig, out: Parsed) -> PluginSpec:
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


def transform_specs(props: Mapping[str, str], aliases: list[str], out: Parsed) -> list[PluginSpec]:
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
