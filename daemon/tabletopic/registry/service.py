"""The built-in Schema Registry: its HTTP listener and its schemas topic, on a thread of their own.

Converters call a registry synchronously from the sink's event loop when they
meet a schema id for the first time.  Served from that same loop, such a call
would wait on itself; on its own thread and loop the registry answers the
daemon's converters the same way it answers any other client.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from concurrent.futures import Future
from urllib.parse import urlparse

import structlog
from aiohttp import web

from tabletopic.core.listener_security import ListenerSecurity
from tabletopic.kafka.clients import KafkaClients
from tabletopic.registry.rest_api import RegistryApi
from tabletopic.registry.schema_log import SchemaLog
from tabletopic.registry.schema_store import SchemaStore

log = structlog.get_logger(__name__)


class RegistryStartError(RuntimeError):
    pass


class SchemaRegistryService:
    def __init__(self, listener: str, clients: KafkaClients, topic: str, default_level: str,
                 security: ListenerSecurity | None = None) -> None:
        parsed = urlparse(listener)
        self.host, self.port = parsed.hostname or "127.0.0.1", parsed.port if parsed.port is not None else 8081
        self.topic = topic
        self.store = SchemaStore(default_level=default_level)
        self._clients = clients
        self._security = security or ListenerSecurity()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._log: SchemaLog | None = None

    @property
    def url(self) -> str:
        return f"{self._security.scheme}://{self.host}:{self.port}"

    def start(self, timeout_s: float = 60.0) -> None:
        """Load the schemas topic and listen; raise RegistryStartError saying why not."""
        started: Future[None] = Future()
        self._thread = threading.Thread(target=self._run, args=(started,), name="schema-registry", daemon=True)
        self._thread.start()
        try:
            started.result(timeout_s)
        except Exception as exc:
            self.stop()
            raise RegistryStartError(f"the built-in Schema Registry could not start on {self.url} with the "
                                     f"schemas topic {self.topic!r}: {exc!r}") from exc
        log.info("schema registry listening", url=self.url, topic=self.topic)

    def _run(self, started: Future[None]) -> None:
        loop = self._loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(self._start(started))
            if started.exception() is None:
                loop.run_forever()
            loop.run_until_complete(self._shutdown())
        finally:
            loop.close()

    async def _start(self, started: Future[None]) -> None:
        try:
            self._log = SchemaLog(self._clients, self.topic, self.store)
            await self._log.start()
            app = RegistryApi(self.store, self._log).app
            app.middlewares.append(self._security.middleware)
            self._runner = web.AppRunner(app, access_log=None)
            await self._runner.setup()
            site = web.TCPSite(self._runner, self.host, self.port, ssl_context=self._security.context)
            await site.start()
            if self.port == 0:  # report the port the OS picked
                self.port = self._runner.addresses[0][1]
            started.set_result(None)
        except Exception as exc:
            started.set_exception(exc)

    async def _shutdown(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._log is not None:
            await self._log.stop()

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is not None and thread is not None and thread.is_alive():
            with contextlib.suppress(RuntimeError):  # the loop already closed after a failed start
                loop.call_soon_threadsafe(loop.stop)
            thread.join(30)
        self._thread = None
