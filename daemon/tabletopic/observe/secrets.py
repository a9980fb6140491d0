"""What a secret is, decided in one place, and how it is kept out of logs, errors and responses.

A key is a secret if Kafka Connect would treat it as a password: ``*.password``,
``sasl.jaas.config``, ``basic.auth.user.info``, catalog credentials and tokens,
S3 secret keys.  The userinfo of any URL is a secret too, whatever its key.

Shown values keep a config provider's placeholder as written (``${file:...}``
says where the secret lives, not what it is); anything else secret becomes
``[hidden]``.  A :class:`Scrubber` also knows the resolved values, so that one
echoed by a library (an error message, a URL in a log) is hidden as well.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any

HIDDEN = "[hidden]"
_SECRET_SUFFIXES = (".password", "password", ".secret", "secret", "secret-access-key", "secret.access.key",
                    "session-token", "session.token", ".token", "token", ".credential", "credential",
                    "credentials", "sasl.jaas.config", "basic.auth.user.info", "user.info", "private-key",
                    "private.key", "api-key", "api.key", "apikey")
_PLACEHOLDER = re.compile(r"\$\{[A-Za-z0-9_-]+:[^}]*\}")
_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<info>[^/@\s:]+(:[^/@\s]*)?)@")
_MIN_SCRUBBED = 4  # shorter values would hide ordinary words in log lines


def is_secret(key: str) -> bool:
    lowered = key.lower()
    return lowered.endswith(_SECRET_SUFFIXES)


def shown(key: str, value: Any) -> Any:
    """A value as it may be shown: placeholders as written, secrets hidden, URL userinfo hidden."""
    if not isinstance(value, str):
        return value
    if is_secret(key):
        return value if value and not _PLACEHOLDER.sub("", value).strip() else HIDDEN
    return _USERINFO.sub(lambda m: f"{m.group('scheme')}{HIDDEN}@", value)


def redact(props: Mapping[str, Any]) -> dict[str, Any]:
    return {k: shown(k, v) for k, v in props.items()}


def redacted_repr(obj: Any) -> str:
    """A dataclass's repr with each mapping field shown as :func:`redact` shows it: a configuration object
    may end up in an error message or a log line."""
    shown_fields = []
    for f in dataclasses.fields(obj):
        if f.repr:
            value = getattr(obj, f.name)
            shown_fields.append(f"{f.name}={redact(value) if isinstance(value, Mapping) else value!r}")
    return f"{type(obj).__name__}({', '.join(shown_fields)})"


class Scrubber:
    """Hides known secret values wherever they appear in text (log lines, error messages)."""

    def __init__(self) -> None:
        self._values: set[str] = set()

    def learn(self, props: Mapping[str, Any]) -> None:
        """Remember the secret values of resolved ``props`` (and the passwords inside a JAAS line)."""
        for key, value in props.items():
            if isinstance(value, str):
                if is_secret(key):
                    self._add(value)
                    self._add_all(re.findall(r'password\s*=\s*"([^"]*)"', value))
                for match in _USERINFO.finditer(value):
                    self._add(match.group("info").partition(":")[2])

    def _add(self, value: str) -> None:
        if len(value) >= _MIN_SCRUBBED and not _PLACEHOLDER.fullmatch(value):
            self._values.add(value)

    def _add_all(self, values: Iterable[str]) -> None:
        for value in values:
            self._add(value)

    def scrub(self, text: str) -> str:
        for value in sorted(self._values, key=len, reverse=True):
            if value in text:
                text = text.replace(value, HIDDEN)
        return _USERINFO.sub(lambda m: f"{m.group('scheme')}{HIDDEN}@", text)

    def __call__(self, _: Any, __: str, event: MutableMapping[str, Any]) -> dict[str, Any]:
        """A structlog processor: every string in an event is scrubbed."""
        return {k: self.scrub(v) if isinstance(v, str) else _deep(self, v) for k, v in event.items()}


def _deep(scrubber: Scrubber, value: Any) -> Any:
    if isinstance(value, dict):
        return {k: scrubber.scrub(v) if isinstance(v, str) else _deep(scrubber, v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrubber.scrub(v) if isinstance(v, str) else _deep(scrubber, v) for v in value]
    return value
