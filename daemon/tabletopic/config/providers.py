"""Kafka's config providers: ``${file:...}``, ``${env:...}`` and ``${dir:...}`` in worker and connector files.

Declared in the worker file, as in Kafka::

    config.providers=file,env,dir
    config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider
    config.providers.env.class=org.apache.kafka.common.config.provider.EnvVarConfigProvider
    config.providers.dir.class=org.apache.kafka.common.config.provider.DirectoryConfigProvider

Then ``${file:/etc/tabletopic/kafka.properties:sasl.password}`` is the key
``sasl.password`` of that properties file, ``${env:KAFKA_PASSWORD}`` an environment
variable and ``${dir:/run/secrets:kafka-password}`` the content of that file.  Values
are resolved once, when the configuration is parsed; what is shown (the REST API,
``validate``) keeps the placeholder as written.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from tabletopic.config.definition import Problem
from tabletopic.core.java_properties import parse_properties

_CLASSES = {
    "org.apache.kafka.common.config.provider.FileConfigProvider": "file",
    "org.apache.kafka.common.config.provider.EnvVarConfigProvider": "env",
    "org.apache.kafka.common.config.provider.DirectoryConfigProvider": "dir",
}
_PLACEHOLDER = re.compile(r"\$\{(?P<provider>[A-Za-z0-9_-]+):(?P<path>[^}]*?)(?::(?P<key>[^:}]*))?\}")


class Providers:
    def __init__(self, kinds: Mapping[str, str], environ: Mapping[str, str] | None = None) -> None:
        self._kinds = dict(kinds)  # provider name -> file, env or dir
        self._environ = os.environ if environ is None else environ
        self._files: dict[str, dict[str, str]] = {}

    @classmethod
    def from_worker(cls, props: Mapping[str, str], problems: list[Problem]) -> Providers:
        kinds: dict[str, str] = {}
        for name in [n.strip() for n in props.get("config.providers", "").split(",") if n.strip()]:
            key = f"config.providers.{name}.class"
            kind = _CLASSES.get(props.get(key, ""))
            if kind is None:
                problems.append(Problem(key, props.get(key), "must be one of " + ", ".join(sorted(_CLASSES))))
                continue
            kinds[name] = kind
        return cls(kinds)

    def resolve(self, props: Mapping[str, str], problems: list[Problem]) -> dict[str, str]:
        """``props`` with every placeholder replaced; a placeholder that cannot be resolved is a problem."""
        out = {}
        for key, value in props.items():
            if "${" not in value or key.startswith("config.providers"):
                out[key] = value
                continue
            try:
                out[key] = _PLACEHOLDER.sub(lambda m: self._lookup(m), value)
            except LookupError as exc:
                problems.append(Problem(key, value, str(exc)))
                out[key] = value
        return out

    def _lookup(self, match: re.Match[str]) -> str:
        name, path, key = match.group("provider"), match.group("path"), match.group("key")
        kind = self._kinds.get(name)
        if kind is None:
            raise LookupError(f"no config provider {name!r}: declare it in config.providers of the worker file")
        if kind == "env":
            variable = path if key is None else key
            if variable not in self._environ:
                raise LookupError(f"environment variable {variable} is not set")
            return self._environ[variable]
        if kind == "dir":
            if key is None:
                raise LookupError("a ${dir:...} placeholder needs a directory and a file name: ${dir:/path:file}")
            return _read(Path(path) / key).rstrip("\n")
        if key is None:
            raise LookupError("a ${file:...} placeholder needs a file and a key: ${file:/path:key}")
        values = self._files.get(path)
        if values is None:

            values = self._files[path] = parse_properties(_read(Path(path)))
        if key not in values:
            raise LookupError(f"{path} has no key {key!r}")
        return values[key]


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        raise LookupError(f"cannot read {path}: {exc.strerror or exc}") from None
