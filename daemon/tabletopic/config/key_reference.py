"""The key reference, docs/configuration.md's tables: every key with its default and meaning, from the
declarations themselves, so the docs cannot drift from the code (``tabletopic keys`` prints it)."""

from __future__ import annotations

from tabletopic.config.connector_keys import CONNECTOR_KEYS
from tabletopic.config.definition import Key, KeyType
from tabletopic.config.worker import WORKER_KEYS


def key_reference() -> str:
    return "\n".join(["## Connector keys\n", *_key_rows(CONNECTOR_KEYS), "\n## Worker keys\n", *_key_rows(WORKER_KEYS)])


def _key_rows(keys: dict[str, Key]) -> list[str]:
    rows = ["| key | default | meaning |", "| --- | --- | --- |"]
    for key in keys.values():
        default = "" if key.default is None or key.type is KeyType.PREFIX else key.default
        if isinstance(default, list):
            default = ",".join(default)
        if isinstance(default, bool):
            default = str(default).lower()
        allowed = f" One of: {', '.join(key.allowed)}." if key.allowed else ""
        required = " Required." if key.required else ""
        earlier = f" Earlier name, still read: {', '.join(f'`{a}`' for a in key.aliases)}." if key.aliases else ""
        rows.append(f"| `{key.name}` | {f'`{default}`' if default != '' else ''} | "
                    f"{key.doc}{allowed}{required}{earlier} |")
    return rows
