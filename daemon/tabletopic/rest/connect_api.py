"""Kafka Connect's REST API (``connect/runtime`` ``rest/resources``): paths, bodies and status codes.

Every route asks :class:`~tabletopic.connectors.requests.ConnectorRequests` and shapes its answer with
:mod:`tabletopic.rest.entities`.  A refusal is a :class:`~tabletopic.connectors.refusals.HerderError`
and answers Connect's ``{"error_code": ..., "message": ...}`` with the status ``_STATUS`` gives its kind.
One task per daemon: a connector's tasks are the workers that run it.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from importlib.metadata import entry_points
from typing import Any

from aiohttp import web

from tabletopic import __version__
from tabletopic.config.connector_keys import (
    CONNECTOR_CLASSES,
    CONNECTOR_KEYS,
    CONVERTER_GROUP,
    PREDICATE_GROUP,
    TRANSFORM_GROUP,
)
from tabletopic.config.files import as_text
from tabletopic.connectors.config_store import TargetState
from tabletopic.connectors.refusals import AlreadyExists, BadRequest, HerderError, NotFound, NotReady
from tabletopic.connectors.requests import ConnectorRequests
from tabletopic.observe.secrets import redact
from tabletopic.rest import entities
from tabletopic.rest.loggers import LoggerLevels

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
# Connect's answer to each kind of refusal.
_STATUS: dict[type[HerderError], int] = {BadRequest: 400, NotFound: 404, AlreadyExists: 409, NotReady: 503}


def _told(answer: dict[str, Any], warnings: list[str]) -> dict[str, Any]:
    """An answer with the configuration's warnings (keys nothing reads), beside Connect's own fields."""
    return {**answer, "warnings": warnings} if warnings else answer


def _json(body: Any, status: int = 200) -> web.Response:
    return web.json_response(body, status=status, dumps=lambda v: json.dumps(v, separators=(",", ":")))


def _flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "false").strip().lower() == "true"


async def _body(request: web.Request) -> Any:
    try:
        return await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BadRequest(f"Request body is not valid JSON: {exc}") from exc


class ConnectApi:
    def __init__(self, requests: ConnectorRequests, kafka_cluster_id: Callable[[], str | None] = lambda: None) -> None:
        self._requests = requests
        self._cluster_id = kafka_cluster_id
        self.loggers = LoggerLevels()

    def add_routes(self, app: web.Application) -> None:
        app.middlewares.append(self._errors)
        routes: list[tuple[str, str, Handler]] = [
            ("GET", "/", self.root),
            ("GET", "/connectors", self.list_connectors),
            ("POST", "/connectors", self.create),
            ("GET", "/connectors/{c}", self.info),
            ("DELETE", "/connectors/{c}", self.delete),
            ("GET", "/connectors/{c}/config", self.config),
            ("PUT", "/connectors/{c}/config", self.put_config),
            ("PATCH", "/connectors/{c}/config", self.patch_config),
            ("GET", "/connectors/{c}/status", self.status),
            ("PUT", "/connectors/{c}/pause", self.pause),
            ("PUT", "/connectors/{c}/resume", self.resume),
            ("PUT", "/connectors/{c}/stop", self.stop),
            ("POST", "/connectors/{c}/restart", self.restart),
            ("GET", "/connectors/{c}/tasks", self.tasks),
            ("GET", "/connectors/{c}/tasks/{t}/status", self.task_status),
            ("POST", "/connectors/{c}/tasks/{t}/restart", self.restart_task),
            ("GET", "/connectors/{c}/topics", self.topics),
            ("PUT", "/connectors/{c}/topics/reset", self.reset_topics),
            ("GET", "/connectors/{c}/offsets", self.offsets),
            ("PATCH", "/connectors/{c}/offsets", self.alter_offsets),
            ("DELETE", "/connectors/{c}/offsets", self.reset_offsets),
            ("GET", "/connector-plugins", self.plugins),
            ("GET", "/connector-plugins/{p}/config", self.plugin_config),
            ("PUT", "/connector-plugins/{p}/config/validate", self.validate),
            ("GET", "/admin/loggers", self.list_loggers),
            ("GET", "/admin/loggers/{l}", self.get_logger),
            ("PUT", "/admin/loggers/{l}", self.set_logger),
        ]
        for method, path, handler in routes:
            # Connect's JAX-RS resources take every path with a trailing slash too (clients send it).
            for variant in (path, path + "/") if path != "/" else (path,):
                if method == "GET":
                    app.router.add_get(variant, handler)
                else:
                    app.router.add_route(method, variant, handler)

    @web.middleware
    async def _errors(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except HerderError as exc:
            status = _STATUS.get(type(exc), 500)
            response = _json(entities.error(status, str(exc)), status)
            if status == 503:
                response.headers["Retry-After"] = "5"  # what a client should wait before asking again
            return response
        except web.HTTPException as exc:
            if exc.status < 400 or exc.content_type == "application/json":
                raise
            # aiohttp's own 404 and 405, in Connect's error shape.
            return _json(entities.error(exc.status, exc.reason), exc.status)

    # -- server ---------------------------------------------------------------------------------------
    async def root(self, _: web.Request) -> web.Response:
        return _json({"version": __version__, "commit": "", "kafka_cluster_id": self._cluster_id() or ""})

    # -- connectors -----------------------------------------------------------------------------------
    def _info(self, name: str) -> dict[str, Any]:
        spec = self._requests.spec(name)
        return entities.connector_info(name, spec.config, len(self._requests.tasks(name)))

    def _status(self, name: str) -> dict[str, Any]:
        state, trace, tasks = self._requests.status(name)
        worker = tasks[0].worker_id if tasks else self._requests.worker_id
        return entities.connector_state_info(name, state, worker, trace, tasks)

    async def list_connectors(self, request: web.Request) -> web.Response:
        names = self._requests.names()
        expand = [e for value in request.query.getall("expand", []) for e in value.split(",")]
        if not expand:
            return _json(names)
        out: dict[str, dict[str, Any]] = {}
        for name in names:
            try:
                out[name] = {**({"status": self._status(name)} if "status" in expand else {}),
                             **({"info": self._info(name)} if "info" in expand else {})}
            except NotFound:  # deleted while this was answered
                continue
        return _json(out)

    async def create(self, request: web.Request) -> web.Response:
        body = await _body(request)
        if not isinstance(body, dict) or not isinstance(body.get("config"), dict):
            raise BadRequest("Request body must be an object with a 'config' object (and a 'name')")
        name = str(body.get("name") or body["config"].get("name") or "").strip()
        initial = body.get("initial_state")
        try:
            target = TargetState(str(initial).upper()) if initial is not None else None
        except ValueError as exc:
            raise BadRequest(f"initial_state must be one of RUNNING, PAUSED or STOPPED, not {initial!r}") from exc
        _, warnings = await self._requests.create(name, body["config"], target)
        return _json(_told(self._info(name), warnings), 201)

    async def info(self, request: web.Request) -> web.Response:
        return _json(self._info(request.match_info["c"]))

    async def delete(self, request: web.Request) -> web.Response:
        await self._requests.delete(request.match_info["c"])
        return web.Response(status=204)

    async def config(self, request: web.Request) -> web.Response:
        return _json(redact(self._requests.spec(request.match_info["c"]).config))

    async def put_config(self, request: web.Request) -> web.Response:
        body = await _body(request)
        if not isinstance(body, dict):
            raise BadRequest("Request body must be a JSON object of configuration keys")
        name = request.match_info["c"]
        _, created, warnings = await self._requests.put_config(name, body)
        return _json(_told(self._info(name), warnings), 201 if created else 200)

    async def patch_config(self, request: web.Request) -> web.Response:
        body = await _body(request)
        if not isinstance(body, dict):
            raise BadRequest("Request body must be a JSON object of configuration keys")
        name = request.match_info["c"]
        _, warnings = await self._requests.patch_config(name, body)
        return _json(_told(self._info(name), warnings))

    async def status(self, request: web.Request) -> web.Response:
        return _json(self._status(request.match_info["c"]))

    async def pause(self, request: web.Request) -> web.Response:
        await self._requests.set_target(request.match_info["c"], TargetState.PAUSED)
        return web.Response(status=202)

    async def resume(self, request: web.Request) -> web.Response:
        await self._requests.set_target(request.match_info["c"], TargetState.RUNNING)
        return web.Response(status=202)

    async def stop(self, request: web.Request) -> web.Response:
        await self._requests.set_target(request.match_info["c"], TargetState.STOPPED)
        return web.Response(status=204)

    async def restart(self, request: web.Request) -> web.Response:
        name = request.match_info["c"]
        include_tasks, only_failed = _flag(request, "includeTasks"), _flag(request, "onlyFailed")
        status = self._status(name)
        await self._requests.restart(name, include_tasks, only_failed)
        if not include_tasks and not only_failed:
            return web.Response(status=204)  # Connect's answer to a plain restart: no body
        for task in status["tasks"]:
            if not only_failed or task["state"] == "FAILED":
                task["state"] = "RESTARTING"
                task.pop("trace", None)
        return _json(status, 202)

    # -- tasks ----------------------------------------------------------------------------------------
    def _task(self, request: web.Request) -> int:
        name, text = request.match_info["c"], request.match_info["t"]
        self._requests.spec(name)
        if not text.lstrip("-").isdigit() or not 0 <= int(text) < len(self._requests.tasks(name)):
            raise NotFound(f"Task {name}-{text} not found")
        return int(text)

    async def tasks(self, request: web.Request) -> web.Response:
        name = request.match_info["c"]
        spec = self._requests.spec(name)
        return _json([entities.task_info(name, i, spec.config) for i in range(len(self._requests.tasks(name)))])

    async def task_status(self, request: web.Request) -> web.Response:
        task = self._task(request)
        return _json(entities.task_state(task, self._requests.tasks(request.match_info["c"])[task]))

    async def restart_task(self, request: web.Request) -> web.Response:
        await self._requests.restart_task(request.match_info["c"], self._task(request))
        return web.Response(status=204)

    # -- topics ---------------------------------------------------------------------------------------
    async def topics(self, request: web.Request) -> web.Response:
        name = request.match_info["c"]
        return _json(entities.active_topics(name, self._requests.topics(name)))

    async def reset_topics(self, request: web.Request) -> web.Response:
        await self._requests.reset_topics(request.match_info["c"])
        return web.Response(status=202)

    # -- offsets --------------------------------------------------------------------------------------
    async def offsets(self, request: web.Request) -> web.Response:
        return _json(entities.connector_offsets(await self._requests.offsets(request.match_info["c"])))

    async def alter_offsets(self, request: web.Request) -> web.Response:
        name = request.match_info["c"]
        self._requests.spec(name)
        await self._requests.change_offsets(name, entities.parse_offsets(await _body(request)))
        return _json({"message": "The offsets for this connector have been altered successfully"})

    async def reset_offsets(self, request: web.Request) -> web.Response:
        await self._requests.change_offsets(request.match_info["c"], None)
        return _json({"message": "The offsets for this connector have been reset successfully"})

    # -- plugins --------------------------------------------------------------------------------------
    async def plugins(self, request: web.Request) -> web.Response:
        out = [entities.plugin_info(c, "sink", __version__) for c in CONNECTOR_CLASSES]
        if request.query.get("connectorsOnly", "true").lower() == "false":
            for group, kind in ((CONVERTER_GROUP, "converter"), (TRANSFORM_GROUP, "transformation"),
                                (PREDICATE_GROUP, "predicate")):
                for ep in sorted(entry_points(group=group), key=lambda e: e.name):
                    out.append(entities.plugin_info(ep.name, kind, ep.dist.version if ep.dist else None))
        return _json(out)

    def _plugin(self, request: web.Request) -> str:
        plugin = request.match_info["p"]
        for name in CONNECTOR_CLASSES:
            if plugin in (name, name.rsplit(".", 1)[-1], name.rsplit(".", 1)[-1].removesuffix("Connector")):
                return name
        raise NotFound(f"Unknown plugin {plugin}.")

    async def plugin_config(self, request: web.Request) -> web.Response:
        self._plugin(request)
        keys = [k for k in CONNECTOR_KEYS.values() if k.type.value != "prefix"]
        return _json([entities.config_key_info(k, i) for i, k in enumerate(keys)])

    async def validate(self, request: web.Request) -> web.Response:
        plugin = self._plugin(request)
        body = await _body(request)
        if not isinstance(body, dict):
            raise BadRequest("Request body must be a JSON object of configuration keys")
        config = {str(k): as_text(v) for k, v in body.items() if v is not None}
        if config.get("connector.class", plugin) not in CONNECTOR_CLASSES:
            raise BadRequest(f"Included connector type {config['connector.class']} does not match request type "
                             f"{plugin}")
        config.setdefault("connector.class", plugin)
        problems, warnings = self._requests.problems_of(config)
        return _json(_told(entities.config_infos(plugin, CONNECTOR_KEYS, config, problems), warnings))

    # -- loggers --------------------------------------------------------------------------------------
    async def list_loggers(self, _: web.Request) -> web.Response:
        return _json(self.loggers.all())

    async def get_logger(self, request: web.Request) -> web.Response:
        name = request.match_info["l"]
        info = self.loggers.get(name)
        if info is None:
            raise NotFound(f"Logger {name} not found.")
        return _json(info)

    async def set_logger(self, request: web.Request) -> web.Response:
        body = await _body(request)
        level = body.get("level") if isinstance(body, dict) else None
        if not isinstance(level, str):
            raise BadRequest("Desired 'level' parameter was not specified in request.")
        changed = self.loggers.set(request.match_info["l"], level)
        if changed is None:
            raise NotFound(f"invalid log level '{level}'.")
        return _json(changed)
