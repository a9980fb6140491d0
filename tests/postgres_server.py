"""A throwaway PostgreSQL (Debian's package) on 127.0.0.1 for the JDBC catalog, stopped by its own pg_ctl."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType

from tabletopic.demo.broker import free_port

PG_ROOTS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)


def postgres_available() -> bool:
    return bool(PG_ROOTS) and Path("/usr/share/java/postgresql.jar").exists()


class PostgresServer:
    def __init__(self) -> None:
        self.port = free_port()
        self.password = secrets.token_hex(12)
        self.user, self.database = "lake", "lake"
        # initdb refuses to run as root, and the postgres user must reach the data directory: a
        # root-owned 0700 temp dir above it would not do.
        self.root = Path(tempfile.mkdtemp(prefix="tabletopic-pg-", dir="/tmp"))
        self.root.chmod(0o755)
        self._as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        self._bin = PG_ROOTS[0]
        self._started = False

    def _run(self, *cmd: str) -> None:
        proc = subprocess.run([*self._as_postgres, *cmd], capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            raise RuntimeError(f"{cmd[0]} failed: {proc.stdout}{proc.stderr}")

    def start(self) -> PostgresServer:
        pw = self.root / "pw"
        pw.write_text(self.password + "\n")
        if self._as_postgres:
            shutil.chown(self.root, "postgres")
            shutil.chown(pw, "postgres")
        data = self.root / "data"
        self._run(str(self._bin / "initdb"), "-D", str(data), "-U", self.user, f"--pwfile={pw}",
                  "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--no-sync")
        self._run(str(self._bin / "pg_ctl"), "-D", str(data), "-l", str(self.root / "log"), "-w", "-o",
                  f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.root} -c fsync=off "
                  "-c synchronous_commit=off", "start")
        self._started = True
        self._run(str(self._bin / "createdb"), "-h", str(self.root), "-p", str(self.port), "-U", self.user,
                  self.database)
        return self

    def pause(self) -> None:
        """Stop the server, keeping its data: a catalog outage."""
        self._run(str(self._bin / "pg_ctl"), "-D", str(self.root / "data"), "-m", "fast", "-w", "stop")
        self._started = False

    def resume(self) -> None:
        self._run(str(self._bin / "pg_ctl"), "-D", str(self.root / "data"), "-l", str(self.root / "log"), "-w", "-o",
                  f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.root} -c fsync=off "
                  "-c synchronous_commit=off", "start")
        self._started = True

    def stop(self) -> None:
        if self._started:
            self._started = False
            self._run(str(self._bin / "pg_ctl"), "-D", str(self.root / "data"), "-m", "fast", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)

    def jdbc_props(self) -> dict[str, str]:
        """Iceberg's JDBC catalog on this server (schema V1: with views)."""
        return {"type": "jdbc", "uri": f"jdbc:postgresql://127.0.0.1:{self.port}/{self.database}",
                "jdbc.user": self.user, "jdbc.password": self.password, "jdbc.schema-version": "V1"}

    def sqlalchemy_uri(self) -> str:
        return f"postgresql+pg8000://{self.user}:{self.password}@127.0.0.1:{self.port}/{self.database}"

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
