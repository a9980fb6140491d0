"""Confluent Schema Registry's REST API over the store and the schemas topic.

Reads answer from this daemon's replay of the topic; a read that misses first
catches up with the topic, so a schema another daemon registered a moment ago
is found.  Writes are planned against the caught-up state, appended, and
confirmed once read back; a write that lost a race with another daemon is
planned again.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from tabletopic.registry.schema_log import SchemaLog
from tabletopic.registry.schema_records import RegistryError, Write, config_write, no_subject_config, schema_not_found
from tabletopic.registry.schema_store import SchemaStore
from tabletopic.registry.schema_types import TYPES, canonical

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
_RACE_ATTEMPTS = 8

Handler = Callable[[web.Request], Awaitable[Any]]


def _reply(body: Any, status: int = 200) -> web.Response:
    return web.Response(text=json.dumps(body), status=status, content_type=CONTENT_TYPE)


def _flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "false").lower() == "true"


async def _body(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError:
        raise RegistryError(422, 42201, "Invalid schema: the request body is not JSON") from None
    if not isinstance(body, dict):
        raise RegistryError(422, 42201, "Invalid schema: the request body must be a JSON object")
    return body


def _schema_fields(body: dict[str, Any]) -> tuple[str, str, list[dict[str, Any]]]:
    text = body.get("schema")
    if not isinstance(text, str):
        raise RegistryError(422, 42201, "Invalid schema: 'schema' must be a string holding the schema")
    return text, str(body.get("schemaType") or "AVRO"), list(body.get("references") or [])


def _raw(text: str, schema_type: str) -> web.Response:
    """The schema alone: JSON for Avro and JSON Schema, the text as registered for Protobuf."""
    if schema_type == "PROTOBUF":
        return web.Response(text=text, content_type="text/plain")
    return _reply(json.loads(text))


class RegistryApi:
    def __init__(self, store: SchemaStore, schema_log: SchemaLog) -> None:
        self.store, self.log = store, schema_log
        self._write_lock = asyncio.Lock()
        app = web.Application(middlewares=[self._errors])
        routes: list[tuple[str, str, Handler]] = [
            ("GET", "/", self.root),
            ("GET", "/schemas/types", self.types),
            ("GET", "/schemas/ids/{id}", self.schema_by_id),
            ("GET", "/schemas/ids/{id}/schema", self.raw_schema_by_id),
            ("GET", "/schemas/ids/{id}/versions", self.versions_of_id),
            ("GET", "/schemas/ids/{id}/subjects", self.subjects_of_id),
            ("GET", "/subjects", self.subjects),
            ("POST", "/subjects/{subject}", self.lookup),
            ("DELETE", "/subjects/{subject}", self.delete_subject),
            ("GET", "/subjects/{subject}/versions", self.versions),
            ("POST", "/subjects/{subject}/versions", self.register),
            ("GET", "/subjects/{subject}/versions/{version}", self.version),
            ("GET", "/subjects/{subject}/versions/{version}/schema", self.raw_version),
            ("GET", "/subjects/{subject}/versions/{version}/referencedby", self.referenced_by),
            ("DELETE", "/subjects/{subject}/versions/{version}", self.delete_version),
            ("POST", "/compatibility/subjects/{subject}/versions", self.compatibility_all),
            ("POST", "/compatibility/subjects/{subject}/versions/{version}", self.compatibility),
            ("GET", "/config", self.get_config),
            ("PUT", "/config", self.put_config),
            ("GET", "/config/{subject}", self.get_config),
            ("PUT", "/config/{subject}", self.put_config),
            ("DELETE", "/config/{subject}", self.delete_config),
            ("GET", "/mode", self.mode),
        ]
        for method, path, handler in routes:
            app.router.add_route(method, path, handler)
        self.app = app

    @web.middleware
    async def _errors(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except RegistryError as exc:
            return _reply({"error_code": exc.code, "message": exc.message}, exc.status)
        except (asyncio.TimeoutError, OSError) as exc:
            return _reply({"error_code": 50003, "message": f"the schemas topic is not reachable: {exc!r}"}, 500)

    async def _fresh(self, read: Callable[[], Any]) -> Any:
        """Answer from local state; on a miss, catch up with the topic once and ask again."""
        try:
            return read()
        except RegistryError as exc:
            if exc.status != 404:
                raise
        await self.log.catch_up()
        return read()

    async def _write(self, plan: Callable[[], tuple[Any, list[Write]]], settled: Callable[[Any], bool]) -> Any:
        async with self._write_lock:
            for _ in range(_RACE_ATTEMPTS):
                await self.log.catch_up()
                result, writes = plan()
                if not writes:
                    return result
                await self.log.append(writes)
                if settled(result):
                    return result
                # Another daemon's record came first: withdraw ours (so compaction can never bring it
                # back) and plan again against what won.
                await self.log.append([Write(w.key, None) for w in writes if w.value is not None])
        raise RegistryError(500, 50001, "could not register: other daemons kept registering at the same time")

    # -- schemas -------------------------------------------------------------------------------------
    async def root(self, _: web.Request) -> web.Response:
        return _reply({})

    async def types(self, _: web.Request) -> web.Response:
        return _reply(list(TYPES))

    def _shown(self, request: web.Request, schema_id: int, body: dict[str, Any]) -> dict[str, Any]:
        """``?format=serialized`` asks for a Protobuf schema as its base64 descriptor (confluent-kafka's
        Python clients read it so); any other schema, or format, is shown as registered."""
        if request.query.get("format") == "serialized" and body.get("schemaType") == "PROTOBUF":
            body["schema"] = self.store.parsed(schema_id).serialized()  # type: ignore[union-attr]  # a PROTOBUF schema is parsed
        return body

    def _id(self, request: web.Request) -> int:
        try:
            return int(request.match_info["id"])
        except ValueError:
            raise schema_not_found() from None

    async def schema_by_id(self, request: web.Request) -> web.Response:
        stored = await self._fresh(lambda: self.store.schema(self._id(request)))
        return _reply(self._shown(request, stored.id, stored.body()))

    async def raw_schema_by_id(self, request: web.Request) -> web.Response:
        stored = await self._fresh(lambda: self.store.schema(self._id(request)))
        return _raw(stored.schema, stored.schema_type)

    async def versions_of_id(self, request: web.Request) -> web.Response:
        uses = await self._fresh(lambda: self.store.uses_of(self._id(request)))
        return _reply([{"subject": s, "version": v} for s, v in uses])

    async def subjects_of_id(self, request: web.Request) -> web.Response:
        uses = await self._fresh(lambda: self.store.uses_of(self._id(request)))
        return _reply(sorted({s for s, _ in uses}))

    # -- subjects ------------------------------------------------------------------------------------
    async def subjects(self, request: web.Request) -> web.Response:
        await self.log.catch_up()
        return _reply(self.store.subject_names(_flag(request, "deleted")))

    async def versions(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        found = await self._fresh(lambda: self.store.versions(subject, _flag(request, "deleted")))
        return _reply([v.version for v in found])

    def _version_body(self, subject: str, version: str, deleted: bool) -> dict[str, Any]:
        v = self.store.version(subject, version, deleted)
        return {"subject": subject, "version": v.version, "id": v.id, **self.store.schema(v.id).body()}

    async def version(self, request: web.Request) -> web.Response:
        subject, version = request.match_info["subject"], request.match_info["version"]
        body = await self._fresh(lambda: self._version_body(subject, version, _flag(request, "deleted")))
        return _reply(self._shown(request, body["id"], body))

    async def raw_version(self, request: web.Request) -> web.Response:
        subject, version = request.match_info["subject"], request.match_info["version"]
        body = await self._fresh(lambda: self._version_body(subject, version, _flag(request, "deleted")))
        return _raw(body["schema"], body.get("schemaType", "AVRO"))

    async def referenced_by(self, request: web.Request) -> web.Response:
        subject, version = request.match_info["subject"], request.match_info["version"]
        number = (await self._fresh(lambda: self.store.version(subject, version))).version
        return _reply(self.store.referenced_by(subject, number))

    async def register(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        text, schema_type, refs = _schema_fields(await _body(request))
        if _flag(request, "normalize") and schema_type != "PROTOBUF":
            # Kept as its canonical JSON; a Protobuf schema is kept as written, and is the same schema
            # as any other writing of it with or without normalize.
            text = canonical(schema_type, None, text)

        def plan() -> tuple[tuple[int, Write | None], list[Write]]:
            schema_id, write = self.store.plan_register(subject, text, schema_type, refs)
            return (schema_id, write), [write] if write else []

        def settled(planned: tuple[int, Write | None]) -> bool:
            _, write = planned
            if write is None:
                return True
            found = self.store.subjects.get(subject, {}).get(write.key["version"])
            return found is not None and found.token == write.key["token"]

        schema_id, _ = await self._write(plan, settled)
        return _reply({"id": schema_id})

    async def lookup(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        text, schema_type, refs = _schema_fields(await _body(request))
        v, stored = await self._fresh(lambda: self.store.lookup(subject, text, schema_type, refs,
                                                                _flag(request, "deleted")))
        return _reply({"subject": subject, "version": v.version, "id": v.id, **stored.body()})

    async def delete_subject(self, request: web.Request) -> web.Response:
        subject, permanent = request.match_info["subject"], _flag(request, "permanent")
        versions = await self._write(lambda: self.store.plan_delete(subject, None, permanent), lambda _: True)
        return _reply(versions)

    async def delete_version(self, request: web.Request) -> web.Response:
        subject, permanent = request.match_info["subject"], _flag(request, "permanent")
        version = request.match_info["version"]
        versions = await self._write(lambda: self.store.plan_delete(subject, version, permanent), lambda _: True)
        return _reply(versions[0])  # plan_delete found the version or raised

    # -- compatibility -------------------------------------------------------------------------------
    async def _compatibility(self, request: web.Request, version: str | None) -> web.Response:
        subject = request.match_info["subject"]
        text, schema_type, refs = _schema_fields(await _body(request))
        await self.log.catch_up()
        problems = self.store.compatible(subject, text, schema_type, refs, version)
        body: dict[str, Any] = {"is_compatible": not problems}
        if _flag(request, "verbose"):
            body["messages"] = problems
        return _reply(body)

    async def compatibility(self, request: web.Request) -> web.Response:
        return await self._compatibility(request, request.match_info["version"])

    async def compatibility_all(self, request: web.Request) -> web.Response:
        return await self._compatibility(request, None)

    # -- config --------------------------------------------------------------------------------------
    async def get_config(self, request: web.Request) -> web.Response:
        subject = request.match_info.get("subject")
        await self.log.catch_up()
        if subject is not None and subject not in self.store.configs and not _flag(request, "defaultToGlobal"):
            raise no_subject_config(subject)
        return _reply({"compatibilityLevel": self.store.level(subject)})

    async def put_config(self, request: web.Request) -> web.Response:
        subject = request.match_info.get("subject")
        level = str((await _body(request)).get("compatibility", "")).upper()
        await self._write(lambda: (level, [config_write(subject, level)]), lambda _: True)
        return _reply({"compatibility": level})

    async def delete_config(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        await self.log.catch_up()
        if subject not in self.store.configs:
            raise no_subject_config(subject)
        old = self.store.configs[subject]
        await self._write(lambda: (old, [config_write(subject, None)]), lambda _: True)
        return _reply({"compatibilityLevel": old})

    async def mode(self, _: web.Request) -> web.Response:
        return _reply({"mode": "READWRITE"})
