"""A TCP proxy on loopback that makes network faults between the daemon and a server, for tests.

Every connection to the proxy is relayed to the server. On request it:

- **resets** every connection at once (an RST, as a crashed or restarted peer gives) and refuses new
  ones for a while, as a server that is down does;
- **blackholes** traffic: sockets stay open and nothing crosses either way until it ends, as a
  partitioned network does (the bytes are held, not dropped: TCP delivers them once it heals);
- adds **latency** to every chunk relayed;
- answers **HTTP errors** in the server's place (S3's ``503 SlowDown``) to a share of new connections.

It runs its own event loop in a thread, so a test drives it with plain calls while its daemon runs in
another process. Each fault is kept in :attr:`FaultProxy.faults`.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
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
        # What the faults did: connections cut (reset or refused), requests answered 503, relayed at all.
        self.cut = self.answered_503 = self.relayed = 0
        self._refuse_until = self._hole_until = self._slow_until = self._errors_until = 0.0
        self._delay_s = self._error_share = 0.0
        self._random = random.Random(port or 0)
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
            self.cut += len(self._writers) // 2
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

    def http_errors(self, seconds: float, share: float) -> None:
        """For ``seconds``, answer ``share`` of new connections' first request with S3's 503 SlowDown in
        the server's place. Open connections are reset first, so that clients connect anew."""
        def begin() -> None:
            self._error_share, self._errors_until = share, time.monotonic() + seconds
            self.cut += len(self._writers) // 2
            for writer in list(self._writers):
                writer.transport.abort()
        self._loop.call_soon_threadsafe(begin)
        self.faults.append(Fault("http 503", time.monotonic(), seconds))

    # -- relay --------------------------------------------------------------------------------------
    async def _relay(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        if time.monotonic() < self._refuse_until:
            self.cut += 1
            client_writer.transport.abort()
            return
        if time.monotonic() < self._errors_until and self._random.random() < self._error_share:
            self.answered_503 += 1
            await _slow_down(client_reader, client_writer)
            return
        self.relayed += 1
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


_SLOW_DOWN = (b"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SlowDown</Code>"
              b"<Message>Please reduce your request rate.</Message></Error>")


async def _slow_down(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """S3's answer to a client it throttles, after reading the request's head; then the connection closes."""
    with contextlib.suppress(OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError):
        await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        writer.write(b"HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\nConnection: close\r\n"
                     b"Content-Length: " + str(len(_SLOW_DOWN)).encode() + b"\r\n\r\n" + _SLOW_DOWN)
        await writer.drain()
    writer.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
