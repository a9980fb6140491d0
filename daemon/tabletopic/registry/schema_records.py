"""The registry's records and errors, in Confluent's shapes: what the schemas topic holds, and how a
request is refused."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tabletopic.registry.compatibility_levels import LEVELS


class RegistryError(Exception):
    """An error in Confluent's shape: an HTTP status, an ``error_code`` and a message."""

    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(subject: str, version: Any) -> RegistryError:
    return RegistryError(404, 40402, f"Version {version} not found for subject '{subject}'.")


def schema_not_found(what: str = "Schema") -> RegistryError:
    return RegistryError(404, 40403, f"{what} not found")


def no_subject_config(subject: str) -> RegistryError:
    return RegistryError(404, 40408, f"Subject '{subject}' does not have subject-level compatibility configured")


@dataclass(frozen=True)
class StoredSchema:
    id: int
    schema: str
    schema_type: str
    references: tuple[tuple[str, str, int], ...]  # (name, subject, version)

    def value(self, subject: str, version: int, deleted: bool) -> dict[str, Any]:
        """The schemas-topic record of this schema as ``subject``'s ``version``."""
        return {"subject": subject, "version": version, "id": self.id, "schema": self.schema,
                "schemaType": self.schema_type, "deleted": deleted,
                "references": [{"name": n, "subject": s, "version": v} for n, s, v in self.references]}

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {"schema": self.schema}
        if self.schema_type != "AVRO":
            out["schemaType"] = self.schema_type
        if self.references:
            out["references"] = [{"name": n, "subject": s, "version": v} for n, s, v in self.references]
        return out


@dataclass
class Version:
    version: int
    id: int
    deleted: bool
    token: str  # which write claimed this version; its key carries it


@dataclass(frozen=True)
class Write:
    key: dict[str, Any]
    value: dict[str, Any] | None


def config_write(subject: str | None, level: str | None) -> Write:
    if level is not None and level not in LEVELS:
        raise RegistryError(422, 42203, f"Invalid compatibility level {level!r}; one of {', '.join(LEVELS)}")
    return Write({"keytype": "CONFIG", "subject": subject, "magic": 0},
                 None if level is None else {"compatibilityLevel": level})


def schema_key(subject: str, version: int, schema_id: int, token: str) -> dict[str, Any]:
    return {"keytype": "SCHEMA", "subject": subject, "version": version, "id": schema_id, "token": token, "magic": 1}


def references_of(refs: list[dict[str, Any]] | None) -> tuple[tuple[str, str, int], ...]:
    try:
        return tuple((str(r["name"]), str(r["subject"]), int(r["version"])) for r in refs or [])
    except (KeyError, TypeError, ValueError):
        raise RegistryError(422, 42201, "Invalid schema: each reference needs a name, a subject and a version") \
            from None
