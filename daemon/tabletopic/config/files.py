"""Read worker and connector files: Java ``.properties``, or JSON in Connect's REST shape."""

from __future__ import annotations

import json
from pathlib import Path

from tabletopic.config.definition import ConfigError, Problem

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str) -> dict[str, str]:
    """Parse java.util.Properties text: comments, continuations, ``=``/``:``/space separators."""
    props: dict[str, str] = {}
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending += line[:-1]
            continue
        logical.append(pending + line)
        pending = ""
    if pending:
        logical.append(pending)
    for line in logical:
        key, value = _split(line)
        props[_unescape(key)] = _unescape(value)
    return props


def _split(line: str) -> tuple[str, str]:
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=: \t":
            key = line[:i]
            rest = line[i:].lstrip(" \t")
            if rest[:1] in ("=", ":") and ch in " \t":
                rest = rest[1:].lstrip(" \t")
            elif ch in "=:":
                rest = line[i + 1:].lstrip(" \t")
            return key, rest
        i += 1
    return line, ""


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u" and i + 5 < len(text):
                out.append(chr(int(text[i + 2:i + 6], 16)))
                i += 6
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def load_config_file(path: str | Path) -> dict[str, str]:
    """Load a .properties or .json file; JSON may be flat or ``{"name": ..., "config": {...}}``."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError([Problem(str(path), None, f"cannot be read: {exc.strerror}")], "file") from exc
    if path.suffix.lower() == ".json" or text.lstrip().startswith("{"):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError([Problem(str(path), None, f"is not valid JSON: {exc}")], "file") from exc
        if not isinstance(doc, dict):
            raise ConfigError([Problem(str(path), None, "must hold a JSON object")], "file")
        if isinstance(doc.get("config"), dict):
            config = {str(k): as_text(v) for k, v in doc["config"].items()}
            if "name" in doc:
                config.setdefault("name", str(doc["name"]))
            return config
        return {str(k): as_text(v) for k, v in doc.items()}
    return parse_properties(text)


def as_text(value: object) -> str:
    """A JSON value as a configuration value: Connect's REST API takes numbers and booleans too."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
