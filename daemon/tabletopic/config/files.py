"""Read worker and connector files: Java ``.properties``, or JSON in Connect's REST shape."""

from __future__ import annotations

import json
from pathlib import Path

from tabletopic.config.definition import ConfigError, Problem
from tabletopic.core.java_properties import parse_properties


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
