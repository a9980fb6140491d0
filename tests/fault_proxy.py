"""A TCP proxy on loopback that makes network faults between the daemon and a server, for tests.

Every connection to the proxy is relayed to the server. On request it:

- **resets** every connection at once (an RST, as a crashed or restarted peer gives) and refuses new
  ones for a while, as a server that is down does;
- **blackholes** traffic: sockets stay open and nothing crosses either way until it ends, as a
  partitioned network does (the bytes are held, not dropped: TCP delivers them once it heals);
- adds **latency** to every chunk relayed.

It runs its own event loop in a thread, so a test drives it with plain calls while its daemon runs in
another process. Each fault is kept in :attr:`FaultProxy.faults`.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from dataclasses import dataclass

_CHUNK = 65536


@dataclass(frozen=True)
class Fault:
    kind: str  # reset, blackhole, latency
    started: float  # time.monotonic()
    seconds: float


class FaultProxy:
    def __init__(self, backend_port: int, port: int | None = None) -> None:
        self.backend_port = backend_port
        self.port = port or _free_port()
        self.faults: list[Fault] = []
        self._refuse_until = self._hole_until = self._slow_until = 0.0
        self._delay_s = 0.0
        self._writers: set[asyncio.StreamWriter] = set()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"fault-proxy-{self.port}", daemon=True)
        self._server: asyncio.Server | None = None

    def start(self) -> FaultProxy:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._relay, "127.0.0.1", self.port), self._loop).result(10)
        return self

    def stop(self) -> None:
        async def close() -> None:
            assert self._server is not None
            self._server.close()
            for writer in list(self._writers):
                writer.transport.abort()
        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    # -- faults -------------------------------------------------------------------------------------
    def reset(self, refuse_s: float) -> None:
        """Reset every connection now, and refuse new ones for ``refuse_s``."""
        def cut() -> None:
            self._refuse_until = time.monotonic() + refuse_s
            for writer in list(self._writers):
                writer.transport.abort()
        self._loop.call_soon_threadsafe(cut)
        self.faults.append(Fault("reset", time.monotonic(), refuse_s))

    def blackhole(self, seconds: float) -> None:
        """Relay nothing either way for ``seconds``; every socket stays open."""
        self._hole_until = time.monotonic() + seconds
        self.faults.append(Fault("blackhole", time.monotonic(), seconds))

    def latency(self, seconds: float, delay_s: float) -> None:
        """Hold every chunk relayed ``delay_s`` before it goes on, for ``seconds``."""
        self._delay_s, self._slow_until = delay_s, time.monotonic() + seconds
        self.faults.append(Fault("latency", time.monotonic(), seconds))

    # -- relay --------------------------------------------------------------------------------------
    async def _relay(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        if time.monotonic() < self._refuse_until:
            client_writer.transport.abort()
            return
        try:
            server_reader, server_writer = await asyncio.open_connection("127.0.0.1", self.backend_port)
        except OSError:
            client_writer.transport.abort()
            return
        self._writers |= {client_writer, server_writer}
        try:
            await asyncio.gather(self._pump(client_reader, server_writer), self._pump(server_reader, client_writer))
        finally:
            for writer in (client_writer, server_writer):
                self._writers.discard(writer)
                writer.transport.abort()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while data := await reader.read(_CHUNK):
                while time.monotonic() < self._hole_until:
                    await asyncio.sleep(0.05)
                if time.monotonic() < self._slow_until:
                    await asyncio.sleep(self._delay_s)
                writer.write(data)
                await writer.drain()
        # One side closed: so does the other, as a relay that holds no state must.
        writer.transport.abort()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
