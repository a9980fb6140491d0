"""The worker's HTTP listener: liveness, readiness, Prometheus metrics and Connect's read-only REST API."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from tabletopic import __version__
from tabletopic.ops.listener_security import ListenerSecurity


@dataclass
class ConnectorView:
    """What the REST API shows of one connector."""

    name: str
    config: dict[str, str]
    status: Callable[[], dict[str, Any]]
    ready: Callable[[], tuple[bool, str]]


class HttpServer:
    def __init__(self, listener: str, registry: CollectorRegistry, connectors: list[ConnectorView],
                 security: ListenerSecurity | None = None,
                 alive: Callable[[], tuple[bool, str]] = lambda: (True, "ok")) -> None:
        parsed = urlparse(listener)
        self.host, self.port = parsed.hostname or "127.0.0.1", parsed.port if parsed.port is not None else 8083
        self._registry = registry
        self._connectors = {c.name: c for c in connectors}
        self._runner: web.AppRunner | None = None
        self._security = security or ListenerSecurity()
        self._alive = alive
        app = web.Application(middlewares=[self._security.middleware])
        app.router.add_get("/", self._root)
        app.router.add_get("/health", self._health)
        app.router.add_get("/ready", self._ready)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/connectors", self._list)
        app.router.add_get("/connectors/{name}", self._info)
        app.router.add_get("/connectors/{name}/config", self._config)
        app.router.add_get("/connectors/{name}/status", self._status)
        self._app = app

    async def start(self) -> None:
        self._runner = web.AppRunner(self._app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=self._security.context)
        await site.start()
        if self.port == 0:  # report the port the OS picked
            server = site._server
            if server is not None and server.sockets:
                self.port = server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _root(self, _: web.Request) -> web.Response:
        return web.json_response({"version": __version__, "commit": "", "kafka_cluster_id": ""})

    async def _health(self, _: web.Request) -> web.Response:
        ok, why = self._alive()
        return web.json_response({"status": "ok"} if ok else {"status": "down", "reason": why},
                                 status=200 if ok else 503)

    async def _ready(self, _: web.Request) -> web.Response:
        reasons = {}
        for name, view in self._connectors.items():
            ok, why = view.ready()
            if not ok:
                reasons[name] = why
        if reasons:
            return web.json_response({"status": "not ready", "reasons": reasons}, status=503)
        return web.json_response({"status": "ready"})

    async def _metrics(self, _: web.Request) -> web.Response:
        body = generate_latest(self._registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    def _view(self, request: web.Request) -> ConnectorView:
        view = self._connectors.get(request.match_info["name"])
        if view is None:
            raise web.HTTPNotFound(text=f'{{"error_code":404,"message":"Connector {request.match_info["name"]} '
                                   'not found"}', content_type="application/json")
        return view

    async def _list(self, _: web.Request) -> web.Response:
        return web.json_response(sorted(self._connectors))

    async def _info(self, request: web.Request) -> web.Response:
        view = self._view(request)
        return web.json_response({"name": view.name, "config": view.config, "tasks": [
            {"connector": view.name, "task": 0}], "type": "sink"})

    async def _config(self, request: web.Request) -> web.Response:
        return web.json_response(self._view(request).config)

    async def _status(self, request: web.Request) -> web.Response:
        return web.json_response(self._view(request).status())
