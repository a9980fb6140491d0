"""The jars Iceberg needs to reach object storage and remote catalogs, taken from one PyPI wheel.

The Iceberg runtime jar carries ``S3FileIO``, ``GlueCatalog`` and ``RESTCatalog`` but not
what they call: the AWS SDK v2, and Apache httpclient5 under Iceberg's shaded package name.
The wheel ``bodo-iceberg-connector`` ships both (SDK 2.29.26, httpclient5 5.3.1).  It pins
pyarrow, so it is never installed as a dependency: its wheel is downloaded without
dependencies (or found installed) and only the jars named here are taken from it.

Two repairs make the REST client load:

* httpclient5 is relocated into ``org.apache.iceberg.shaded.org.apache.hc``, as the
  runtime jar's own build does;
* ``TlsSocketStrategy`` (httpclient5 5.4+) is missing from 5.3.1, and the JVM's verifier
  loads it for every REST catalog.  An empty interface of that name stands in: the code
  that would call it runs only with ``rest.client.tls.configurer-impl`` set.
"""

from __future__ import annotations

import fcntl
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

from tabletopic.write.jar_relocation import Relocation, relocate_jars

WHEEL_NAME, WHEEL_VERSION = "bodo-iceberg-connector", "2026.10"
_WHEEL_JARS = "bodo_iceberg_connector/jars/libs/"
_SDK = "2.29.26"
_SDK_ARTIFACTS = (
    # S3FileIO, and the classes Iceberg's AwsProperties loads eagerly (kms, sts)
    "s3", "sts", "kms", "sdk-core", "aws-core", "auth", "regions", "utils", "http-client-spi",
    "url-connection-client", "apache-client", "profiles", "protocol-core", "aws-xml-protocol",
    "aws-query-protocol", "aws-json-protocol", "json-utils", "third-party-jackson-core", "endpoints-spi",
    "metrics-spi", "identity-spi", "http-auth", "http-auth-spi", "http-auth-aws", "http-auth-aws-eventstream",
    "checksums", "checksums-spi", "retries", "retries-spi", "arns", "annotations", "crt-core",
    # GlueCatalog
    "glue",
)
_PLAIN_JARS = (*(f"{a}-{_SDK}.jar" for a in _SDK_ARTIFACTS), "eventstream-1.0.1.jar", "reactive-streams-1.0.4.jar")
_HTTPCLIENT5_JARS = ("httpclient5-5.3.1.jar", "httpcore5-5.2.jar", "httpcore5-h2-5.2.4.jar")
_HTTPCLIENT5 = Relocation("org.apache.hc", "org.apache.iceberg.shaded.org.apache.hc")
_STUB_PACKAGE = "org/apache/iceberg/shaded/org/apache/hc/client5/http/ssl"
_STUB = f"package {_STUB_PACKAGE.replace('/', '.')};\npublic interface TlsSocketStrategy {{}}\n".encode()
SHADED_HTTPCLIENT5 = "iceberg-shaded-httpclient5.jar"
LAYOUT = f"lake-{WHEEL_VERSION}-1"  # the cache folder; change it when what is built here changes

Compile = Callable[[dict[str, bytes], Path], None]


class LakeJarsUnavailable(RuntimeError):
    """The storage and catalog jars are not cached and could not be fetched."""


def cached_lake_jars(root: Path) -> list[Path] | None:
    """The lake jars if they are built under ``root``, else None."""
    target = root / LAYOUT
    return sorted(target.glob("*.jar")) if target.is_dir() else None


def build_lake_jars(root: Path, compile_stub: Compile) -> list[Path]:
    """Build the lake jars under ``root`` once (under a lock, published by rename) and return them."""
    found = cached_lake_jars(root)
    if found is not None:
        return found
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = cached_lake_jars(root)
        if found is not None:
            return found
        staging = Path(tempfile.mkdtemp(prefix=".build-lake-", dir=root))
        try:
            _assemble(staging, compile_stub)
            os.rename(staging, root / LAYOUT)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return cached_lake_jars(root) or []


def _assemble(staging: Path, compile_stub: Compile) -> None:
    with tempfile.TemporaryDirectory() as work:
        libs = _wheel_libs(Path(work))
        missing = [n for n in (*_PLAIN_JARS, *_HTTPCLIENT5_JARS) if not (libs / n).exists()]
        if missing:
            raise LakeJarsUnavailable(f"{WHEEL_NAME}=={WHEEL_VERSION} lacks {', '.join(missing)}")
        for name in _PLAIN_JARS:
            shutil.copyfile(libs / name, staging / name)
        relocate_jars([libs / n for n in _HTTPCLIENT5_JARS], staging / SHADED_HTTPCLIENT5, _HTTPCLIENT5)
    compile_stub({f"{_STUB_PACKAGE}/TlsSocketStrategy.java": _STUB}, staging / "iceberg-shaded-tls-socket-strategy.jar")


def _wheel_libs(work: Path) -> Path:
    """The wheel's jar folder: from an installed copy, else from its wheel fetched without dependencies."""
    spec = importlib.util.find_spec(WHEEL_NAME.replace("-", "_"))
    if spec is not None and spec.origin:
        installed = Path(spec.origin).parent / "jars" / "libs"
        if installed.is_dir():
            return installed
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet",
           "-d", str(work), f"{WHEEL_NAME}=={WHEEL_VERSION}"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wheels = list(work.glob("*.whl"))
    if proc.returncode != 0 or not wheels:
        raise LakeJarsUnavailable(
            f"S3 storage and REST/Glue catalogs need jars from the wheel {WHEEL_NAME}=={WHEEL_VERSION}, and "
            f"fetching it failed ({proc.stderr.strip().splitlines()[-1:] or ['no wheel']}). On a machine that "
            f"can reach your package index run: pip download --no-deps {WHEEL_NAME}=={WHEEL_VERSION}, then "
            f"pip install --no-deps the file, or run python -m tabletopic.write.jvm_classpath there and copy "
            "the cache folder it prints.")
    libs = work / "libs"
    libs.mkdir()
    wanted = {_WHEEL_JARS + n for n in (*_PLAIN_JARS, *_HTTPCLIENT5_JARS)}
    with zipfile.ZipFile(wheels[0]) as wheel:
        for member in wheel.namelist():
            if member in wanted:
                (libs / member.rsplit("/", 1)[1]).write_bytes(wheel.read(member))
    for wheel_file in wheels:
        wheel_file.unlink()
    return libs
