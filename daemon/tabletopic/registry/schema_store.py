"""The registry's state: what the schemas topic says, replayed in order.

Every change is a record in one compacted topic, applied by :meth:`SchemaStore.apply`
in log order, so every daemon that reads the topic holds the same state.  The
store never writes: an operation returns the records that would make it so
(:class:`Write`), the service appends them, and the store sees them when the
log reader applies them.  Two daemons may race to claim the same version or
id; the record earlier in the log wins and the later one is ignored, in
every reader alike.  Each registration's key carries a token of its own, so
compaction never replaces a winner's record with a loser's, and a loser's
withdrawal (a tombstone for its own key) never removes the winner.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from tabletopic.registry import schema_types
from tabletopic.registry.schema_records import (
    RegistryError,
    StoredSchema,
    Version,
    Write,
    references_of,
    schema_key,
    schema_not_found,
    subject_not_found,
    version_not_found,
)
from tabletopic.registry.schema_types import Parsed

DEFAULT_LEVEL = "BACKWARD"
_RECENT = 16


@dataclass
class SchemaStore:
    schemas: dict[int, StoredSchema] = field(default_factory=dict)
    subjects: dict[str, dict[int, Version]] = field(default_factory=dict)
    configs: dict[str | None, str] = field(default_factory=dict)
    default_level: str = DEFAULT_LEVEL
    max_id: int = 0
    _parsed: dict[int, Parsed] = field(default_factory=dict)
    _identities: dict[int, tuple[str, str, tuple[tuple[str, str, int], ...]]] = field(default_factory=dict)
    # A registration reads its schema several times (to plan, to look it up, to pick its id); .proto text
    # costs a protoc run each time, so the last few texts read are kept.
    _recent: dict[tuple[str, str, tuple[int, ...], tuple[str, ...]], Parsed] = field(default_factory=dict)

    # -- replaying the log --------------------------------------------------------------------------
    def apply(self, key: dict[str, Any], value: dict[str, Any] | None) -> None:
        kind = key.get("keytype")
        if kind == "CONFIG":
            if value is None:
                self.configs.pop(key.get("subject"), None)
            else:
                self.configs[key.get("subject")] = str(value["compatibilityLevel"])
        elif kind == "SCHEMA":
            self._apply_schema(str(key["subject"]), int(key["version"]), int(key["id"]), str(key.get("token", "")),
                               value)

    def _apply_schema(self, subject: str, version: int, schema_id: int, token: str,
                      value: dict[str, Any] | None) -> None:
        versions = self.subjects.get(subject, {})
        current = versions.get(version)
        if value is None:  # a hard delete, or a losing writer withdrawing its record
            if current is not None and current.token == token:
                del versions[version]
                if not versions:
                    self.subjects.pop(subject, None)
                self._forget_unused(schema_id)
            return
        refs = tuple((r["name"], r["subject"], int(r["version"])) for r in value.get("references") or [])
        stored = StoredSchema(schema_id, str(value["schema"]), str(value.get("schemaType") or "AVRO"), refs)
        if current is not None and current.token != token:
            return  # another write claimed this version first
        known = self.schemas.get(schema_id)
        if known is not None and (known.schema, known.schema_type, known.references) != \
                (stored.schema, stored.schema_type, stored.references):
            return  # another daemon gave this id to another schema first
        self.schemas[schema_id] = stored
        self.subjects.setdefault(subject, {})[version] = Version(version, schema_id, bool(value.get("deleted")), token)
        self.max_id = max(self.max_id, schema_id)

    def _forget_unused(self, schema_id: int) -> None:
        if not any(v.id == schema_id for versions in self.subjects.values() for v in versions.values()):
            self.schemas.pop(schema_id, None)
            self._parsed.pop(schema_id, None)
            self._identities.pop(schema_id, None)

    # -- reads --------------------------------------------------------------------------------------
    def subject_names(self, deleted: bool = False) -> list[str]:
        return sorted(s for s, versions in self.subjects.items()
                      if deleted or any(not v.deleted for v in versions.values()))

    def versions(self, subject: str, deleted: bool = False) -> list[Version]:
        found = sorted(self.subjects.get(subject, {}).values(), key=lambda v: v.version)
        if not found:
            raise subject_not_found(subject)
        live = [v for v in found if deleted or not v.deleted]
        if not live:
            raise subject_not_found(subject)
        return live

    def version(self, subject: str, version: str, deleted: bool = False) -> Version:
        live = self.versions(subject, deleted)
        if version in ("latest", "-1"):
            return live[-1]
        try:
            number = int(version)
        except ValueError:
            raise RegistryError(422, 42202, "The specified version is not a valid version id. Allowed values are "
                                "between [1, 2^31-1] and the string \"latest\"") from None
        for v in live:
            if v.version == number:
                return v
        raise version_not_found(subject, version)

    def schema(self, schema_id: int) -> StoredSchema:
        found = self.schemas.get(schema_id)
        if found is None:
            raise schema_not_found()
        return found

    def uses_of(self, schema_id: int) -> list[tuple[str, int]]:
        self.schema(schema_id)
        return sorted((s, v.version) for s, versions in self.subjects.items() for v in versions.values()
                      if v.id == schema_id and not v.deleted)

    def referenced_by(self, subject: str, version: int) -> list[int]:
        return sorted({s.id for s in self.schemas.values()
                       if any(ref[1:] == (subject, version) for ref in s.references)
                       and self.uses_of(s.id)})

    def level(self, subject: str | None) -> str:
        if subject is not None and subject in self.configs:
            return self.configs[subject]
        return self.configs.get(None, self.default_level)

    def parsed(self, schema_id: int) -> Parsed:
        found = self._parsed.get(schema_id)
        if found is None:
            stored = self.schema(schema_id)
            found = self._parsed[schema_id] = self._resolve(stored.schema, stored.schema_type, stored.references)
        return found

    def identity(self, schema_id: int) -> tuple[str, str, tuple[tuple[str, str, int], ...]]:
        """What makes two registrations the same schema (worked out once per id, not on every lookup)."""
        found = self._identities.get(schema_id)
        if found is None:
            stored = self.schema(schema_id)
            parsed = self.parsed(schema_id) if stored.schema_type == "PROTOBUF" else None
            found = self._identities[schema_id] = (schema_types.canonical(stored.schema_type, parsed, stored.schema),
                                                   stored.schema_type, stored.references)
        return found

    def _identity_of(self, text: str, schema_type: str, references: tuple[tuple[str, str, int], ...]
                     ) -> tuple[str, str, tuple[tuple[str, str, int], ...]]:
        parsed = self._resolve(text, schema_type, references) if schema_type == "PROTOBUF" else None
        return schema_types.canonical(schema_type, parsed, text), schema_type, references

    def _resolve(self, text: str, schema_type: str, references: tuple[tuple[str, str, int], ...]) -> Parsed:
        if schema_type not in schema_types.TYPES:
            raise RegistryError(422, 42201, f"Invalid schema: unknown schemaType {schema_type!r}; one of "
                                f"{', '.join(schema_types.TYPES)}")
        targets: list[tuple[str, Parsed]] = []
        ids: list[int] = []
        for name, subject, version in references:
            try:
                target = self.version(subject, str(version))
            except RegistryError:
                raise RegistryError(422, 42201, f"Invalid schema: the reference {subject} version {version} "
                                    "does not exist") from None
            targets.append((name, self.parsed(target.id)))
            ids.append(target.id)
        key = (text, schema_type, tuple(ids), tuple(name for name, _ in targets))
        found = self._recent.get(key)
        if found is not None:
            return found
        try:
            found = schema_types.parse(schema_type, text, targets)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:  # each type's Invalid* is a ValueError
            raise RegistryError(422, 42201, f"Invalid schema: {exc}") from None
        if len(self._recent) >= _RECENT:
            self._recent.pop(next(iter(self._recent)))
        self._recent[key] = found
        return found

    def lookup(self, subject: str, text: str, schema_type: str, refs: list[dict[str, Any]],
               deleted: bool = False) -> tuple[Version, StoredSchema]:
        if subject not in self.subjects:
            raise subject_not_found(subject)
        wanted = self._identity_of(text, schema_type or "AVRO", references_of(refs))
        for v in self.versions(subject, deleted):
            if self.identity(v.id) == wanted:
                return v, self.schemas[v.id]
        raise schema_not_found()

    # -- planning writes ----------------------------------------------------------------------------
    def plan_register(self, subject: str, text: str, schema_type: str, refs: list[dict[str, Any]]
                      ) -> tuple[int, Write | None]:
        """The id ``text`` has or would get under ``subject``, and the record to append if any."""
        schema_type = schema_type or "AVRO"
        references = references_of(refs)
        new = self._resolve(text, schema_type, references)
        if subject in self.subjects:
            try:
                return self.lookup(subject, text, schema_type, refs)[0].id, None
            except RegistryError as exc:
                if exc.code not in (40401, 40403):  # not found: the schema is new to the subject
                    raise
        previous = [self.parsed(v.id) for v in self._live(subject)]
        problems = schema_types.compatibility_problems(schema_type, self.level(subject), new, previous)
        if problems:
            raise RegistryError(409, 409, f"Schema being registered is incompatible with an earlier schema for "
                                f"subject \"{subject}\" under {self.level(subject)}: " + "; ".join(problems))
        stored = StoredSchema(self._id_of(text, schema_type, references), text, schema_type, references)
        version = max(self.subjects.get(subject, {}), default=0) + 1
        key = schema_key(subject, version, stored.id, uuid.uuid4().hex)
        return stored.id, Write(key, stored.value(subject, version, deleted=False))

    def compatible(self, subject: str, text: str, schema_type: str, refs: list[dict[str, Any]],
                   version: str | None) -> list[str]:
        if version is None:
            against = [self.parsed(v.id) for v in self._live(subject)]
            level = self.level(subject)
        else:  # an unknown subject or version is a 404 before the schema is even read, as in Confluent's
            against = [self.parsed(self.version(subject, version).id)]
            level = self.level(subject).removesuffix("_TRANSITIVE")
        schema_type = schema_type or "AVRO"
        parsed = self._resolve(text, schema_type, references_of(refs))
        return schema_types.compatibility_problems(schema_type, level, parsed, against)

    def plan_delete(self, subject: str, version: str | None, permanent: bool) -> tuple[list[int], list[Write]]:
        if subject not in self.subjects:
            raise subject_not_found(subject)
        every = sorted(self.subjects[subject].values(), key=lambda v: v.version)
        if version is None:
            targets = every
            if not permanent and all(v.deleted for v in every):
                raise RegistryError(404, 40404, f"Subject '{subject}' was soft deleted. Set permanent=true to "
                                    "delete permanently")
            if permanent and any(not v.deleted for v in every):
                raise RegistryError(404, 40405, f"Subject '{subject}' was not deleted first before being "
                                    "permanently deleted")
        else:
            found = self.version(subject, version, deleted=permanent)
            targets = [found]
            if permanent and not found.deleted:
                raise RegistryError(404, 40407, f"Subject '{subject}' Version {found.version} was not deleted "
                                    "first before being permanently deleted")
        if not permanent:
            targets = [v for v in targets if not v.deleted]
        for v in targets:
            users = self.referenced_by(subject, v.version)
            if users:
                raise RegistryError(422, 42206, f"One or more references exist to the schema {{subject={subject},"
                                    f"version={v.version}}}: schema ids {users}")
        writes = []
        for v in targets:
            key = schema_key(subject, v.version, v.id, v.token)
            writes.append(Write(key, None if permanent else self.schemas[v.id].value(subject, v.version, deleted=True)))
        return [v.version for v in targets], writes

    def _live(self, subject: str) -> list[Version]:
        return sorted((v for v in self.subjects.get(subject, {}).values() if not v.deleted), key=lambda v: v.version)

    def _id_of(self, text: str, schema_type: str, references: tuple[tuple[str, str, int], ...]) -> int:
        wanted = self._identity_of(text, schema_type, references)
        for stored in self.schemas.values():
            if self.identity(stored.id) == wanted:
                return stored.id
        return self.max_id + 1
