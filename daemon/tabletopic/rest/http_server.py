"""The worker's HTTP listener: liveness, readiness and Prometheus metrics, with Connect's REST API beside them.

It is up from the daemon's first second: ``/health`` answers while the JVM is built and
Spark starts, and ``/ready`` says which start-up step is under way.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlparse

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from tabletopic.core.listener_security import ListenerSecurity

Probe = Callable[[], tuple[bool, dict[str, Any]]]
AsyncProbe = Callable[[], Awaitable[tuple[bool, dict[str, Any]]]]


async def _always_alive() -> tuple[bool, dict[str, Any]]:
    return True, {"status": "ok"}


class HttpServer:
    def __init__(self, listener: str, registry: CollectorRegistry, security: ListenerSecurity | None = None,
                 alive: AsyncProbe = _always_alive, ready: Probe = lambda: (True, {"status": "ready"}),
                 routes: Callable[[web.Application], None] | None = None) -> None:
        parsed = urlparse(listener)
        self.host, self.port = parsed.hostname or "127.0.0.1", parsed.port if parsed.port is not None else 8083
        self._registry = registry
        self._runner: web.AppRunner | None = None
        self._security = security or ListenerSecurity()
        self._alive = alive
        self._ready_probe = ready
        app = web.Application(middlewares=[self._security.middleware])
        app.router.add_get("/health", self._health)
        app.router.add_get("/ready", self._ready)
        app.router.add_get("/metrics", self._metrics)
        if routes is not None:
            routes(app)
        self._app = app

    @property
    def scheme(self) -> str:
        return self._security.scheme

    async def start(self) -> None:
        self._runner = web.AppRunner(self._app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=self._security.context)
        await site.start()
        if self.port == 0:  # report the port the OS picked
            self.port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _health(self, _: web.Request) -> web.Response:
        ok, body = await self._alive()  # asked now, never a flag set earlier: see write/jvm_liveness.py
        return web.json_response(body, status=200 if ok else 503)

    async def _ready(self, _: web.Request) -> web.Response:
        ok, body = self._ready_probe()
        return web.json_response(body, status=200 if ok else 503)

    async def _metrics(self, _: web.Request) -> web.Response:
        body = generate_latest(self._registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})
