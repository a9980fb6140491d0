"""Typed configuration keys: one definition per key, with its type, default and documentation.

Both the connector and the worker configuration are declared here as tables of
:class:`Key`.  Parsing collects every problem instead of stopping at the first,
so ``tabletopic validate`` can list them all.  The key reference (docs/configuration.md) is
generated from these tables (``tabletopic keys``, into docs/configuration.md), so the docs cannot drift.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from tabletopic.observe.secrets import shown


class KeyType(Enum):
    STRING = "string"
    INT = "int"
    LONG = "long"
    BOOLEAN = "boolean"
    LIST = "list"
    REGEX = "regex"
    PREFIX = "prefix"  # a family of keys, e.g. iceberg.catalog.*
    PASSWORD = "password"  # a string never shown (see observe/secrets.py)


@dataclass(frozen=True)
class Key:
    name: str
    type: KeyType
    default: Any
    doc: str
    allowed: tuple[str, ...] | None = None
    minimum: int | None = None
    validator: Callable[[Any], str | None] | None = None
    required: bool = False
    aliases: tuple[str, ...] = ()  # earlier names, still read, with a warning that names this one


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a configuration; ``key`` names where it is."""

    key: str
    value: Any
    message: str

    def __str__(self) -> str:
        value = "" if self.value is None else f"={shown(self.key, self.value)!r}"
        return f"{self.key}{value}: {self.message}"


class ConfigError(ValueError):
    """A configuration that cannot run; lists every problem found, and the warnings met on the way (a misspelt
    key is often why a required one is missing)."""

    def __init__(self, problems: list[Problem], source: str = "configuration",
                 warnings: list[str] | None = None) -> None:
        self.problems = problems
        self.warnings = list(warnings or [])
        lines = "\n".join(f"  - {p}" for p in problems)
        told = "".join(f"\n  warning: {w}" for w in self.warnings)
        super().__init__(f"invalid {source} ({len(problems)} problem{'s' if len(problems) != 1 else ''}):\n{lines}"
                         f"{told}")


@dataclass
class Parsed:
    values: dict[str, Any] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


_TRUE = {"true"}
_FALSE = {"false"}


def parse_value(key: Key, raw: Any, out: Parsed) -> Any:
    """Convert ``raw`` (a string from a properties file, or a JSON value) to the key's type."""
    if key.type is KeyType.BOOLEAN:
        if isinstance(raw, bool):
            return raw
        lowered = str(raw).strip().lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        out.problems.append(Problem(key.name, raw, "must be true or false"))
        return key.default
    if key.type in (KeyType.INT, KeyType.LONG):
        try:
            number = int(str(raw).strip())
        except ValueError:
            out.problems.append(Problem(key.name, raw, f"must be a whole number ({key.type.value})"))
            return key.default
        if key.minimum is not None and number < key.minimum:
            out.problems.append(Problem(key.name, raw, f"must be at least {key.minimum}"))
            return key.default
        return number
    if key.type is KeyType.LIST:
        items = raw if isinstance(raw, list) else [s.strip() for s in str(raw).split(",")]
        return [s for s in items if s]
    if key.type is KeyType.REGEX:
        try:
            return re.compile(str(raw))
        except re.error as exc:
            out.problems.append(Problem(key.name, raw, f"is not a valid regular expression: {exc}"))
            return key.default
    value = str(raw).strip()
    if key.allowed is not None and value not in key.allowed:
        out.problems.append(Problem(key.name, raw, f"must be one of: {', '.join(key.allowed)}"))
        return key.default
    return value


def parse_keys(keys: Mapping[str, Key], props: Mapping[str, Any], out: Parsed) -> None:
    """Parse every declared key of ``keys`` present in ``props``; fill defaults for the rest."""
    for name, key in keys.items():
        if key.type is KeyType.PREFIX:
            continue
        if name not in props:
            for alias in key.aliases:
                if alias in props:
                    out.warnings.append(f"{alias} is the earlier name of {name}; it is read as {name}")
                    props = {**props, name: props[alias]}
                    break
        if name in props and props[name] is not None and str(props[name]) != "":
            value = parse_value(key, props[name], out)
            if key.validator is not None and value is not None:
                message = key.validator(value)
                if message:
                    out.problems.append(Problem(name, props[name], message))
            out.values[name] = value
        else:
            if key.required:
                out.problems.append(Problem(name, None, f"is required: {key.doc}"))
            out.values[name] = key.default


def closest(name: str, known: Iterable[str]) -> str | None:
    """The known name ``name`` most likely misspells, if one is close enough to suggest."""
    found = difflib.get_close_matches(name, list(known), n=1, cutoff=0.75)
    return found[0] if found else None


def unknown_key(name: str, known: Iterable[str], what: str = "") -> str:
    """The warning for a key no one reads: it names the key and, where there is one, the key it misspells."""
    near = closest(name, known)
    hint = f"; did you mean {near!r}?" if near else ""
    return f"unknown key {name!r} ignored{what}{hint}"


def aliases(keys: Mapping[str, Key]) -> set[str]:
    """Every earlier name of a key of ``keys``: known, so never reported as unknown."""
    return {alias for key in keys.values() for alias in key.aliases}


def prefixed(props: Mapping[str, Any], prefix: str) -> dict[str, str]:
    """The keys under ``prefix``, with the prefix removed."""
    return {k[len(prefix):]: str(v) for k, v in props.items() if k.startswith(prefix) and len(k) > len(prefix)}
