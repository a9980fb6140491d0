"""Assemble the JVM classpath that Spark needs to run Iceberg, from jars in PyPI wheels only.

Three jars end up on ``spark.jars``:

* the Iceberg Spark runtime, as shipped in ``snowpark-connect-deps-iceberg``;
* Iceberg's shaded Jackson, which that runtime jar lacks: pyspark's own Jackson
  jars relocated into ``org.apache.iceberg.shaded`` (see :mod:`.jar_relocation`);
* tabletopic's writer classes (``java/tabletopic/``), compiled with ``javac`` against the two above;
* for S3 storage and REST or Glue catalogs, the AWS SDK and a shaded httpclient5
  (see :mod:`.lake_jars`), added when a connector needs them and kept once built.

One more jar goes on the driver JVM's own classpath in local mode: the classes Hadoop loads by name
before ``spark.jars`` are there (``java/boot/``: a local file system that starts no processes).

The cached jars are built once into a cache directory keyed by everything they are
made from, under a file lock, and published with an atomic rename: two daemons
starting at once build it at most once and never see half a jar.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from tabletopic.write.jar_relocation import Relocation, relocate_jars
from tabletopic.write.java_build import compile_jar
from tabletopic.write.lake_jars import build_lake_jars, cached_lake_jars

RUNTIME_JAR = "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
_JACKSON_JARS = ("jackson-core-2", "jackson-databind-2", "jackson-annotations-2")
_JACKSON = Relocation("com.fasterxml.jackson", "org.apache.iceberg.shaded.com.fasterxml.jackson")
_LAYOUT_VERSION = "2"  # bump when the way the cache is built changes


class JavaNotFoundError(RuntimeError):
    """Java 17 (a JDK, for javac) is missing."""


@dataclass(frozen=True)
class JvmClasspath:
    runtime_jar: Path
    shaded_jackson_jar: Path
    writer_jar: Path
    extra_jars: tuple[Path, ...] = ()
    boot_jar: Path | None = None  # for the driver JVM's classpath, not spark.jars

    @property
    def jars(self) -> list[Path]:
        return [self.runtime_jar, self.shaded_jackson_jar, self.writer_jar, *self.extra_jars]


def find_java(need_javac: bool = True) -> tuple[Path, Path | None]:
    """Return (java, javac); javac may be None unless ``need_javac``. Raise with what to install."""
    candidates = []
    if os.environ.get("JAVA_HOME"):
        candidates.append(Path(os.environ["JAVA_HOME"]) / "bin")
    for name in ("javac", "java"):
        found = shutil.which(name)
        if found:
            candidates.append(Path(os.path.realpath(found)).parent)
    for bin_dir in candidates:
        java, javac = bin_dir / "java", bin_dir / "javac"
        if java.exists() and javac.exists():
            return java, javac
    if not need_javac:
        for bin_dir in candidates:
            if (bin_dir / "java").exists():
                return bin_dir / "java", None
    raise JavaNotFoundError(
        "tabletopic needs a Java 17 JDK (java and javac) and found none on PATH or in JAVA_HOME. "
        "Install one (on Debian/Ubuntu: apt-get install openjdk-17-jdk-headless) or set JAVA_HOME. "
        "A Java 17 runtime is enough once the jar cache is built (python -m tabletopic.write.jvm_classpath)."
    )


def pyspark_jars_dir() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def iceberg_runtime_jar() -> Path:
    try:
        import snowpark_connect_deps_iceberg
    except ImportError as exc:  # pragma: no cover - a dependency of the package
        raise RuntimeError("the Iceberg runtime wheel is missing: pip install snowpark-connect-deps-iceberg") from exc
    jar = Path(snowpark_connect_deps_iceberg.__file__).parent / "jars" / RUNTIME_JAR
    if not jar.exists():
        raise RuntimeError(f"{RUNTIME_JAR} is not in {jar.parent}; reinstall snowpark-connect-deps-iceberg")
    return jar


def default_cache_dir() -> Path:
    if os.environ.get("TABLETOPIC_CACHE_DIR"):
        return Path(os.environ["TABLETOPIC_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tabletopic"


def _java_sources(*under: str) -> dict[str, bytes]:
    root = resources.files("tabletopic.write").joinpath("java", *under, "tabletopic")
    return {f"tabletopic/{p.name}": p.read_bytes() for p in root.iterdir() if p.name.endswith(".java")}


def _cache_key(runtime: Path, jackson: list[Path], sources: dict[str, bytes], boot: dict[str, bytes]) -> str:
    digest = hashlib.sha256(_LAYOUT_VERSION.encode())
    for jar in [runtime, *jackson]:
        stat = jar.stat()
        digest.update(f"{jar.name}:{stat.st_size}".encode())
    for name in sorted(sources):
        digest.update(name.encode() + sources[name])
    for name in sorted(boot):
        digest.update(b"boot/" + name.encode() + boot[name])
    return digest.hexdigest()[:16]


def build_classpath(cache_dir: Path | None = None, lake: bool = False) -> JvmClasspath:
    """Return the classpath, building its cached jars on first use (which needs javac).

    ``lake`` builds the storage and catalog jars if they are not cached yet; once
    cached they are always on the classpath.
    """
    result = _core_classpath(cache_dir)
    root = result.writer_jar.parent.parent
    extra = build_lake_jars(root, _stub_compiler) if lake else cached_lake_jars(root)
    return JvmClasspath(result.runtime_jar, result.shaded_jackson_jar, result.writer_jar, tuple(extra or ()),
                        result.boot_jar)


def _stub_compiler(sources: dict[str, bytes], jar: Path) -> None:
    _java, javac = find_java(need_javac=True)
    assert javac is not None
    compile_jar(javac, sources, [], jar)


def _core_classpath(cache_dir: Path | None) -> JvmClasspath:
    find_java(need_javac=False)
    spark_jars = pyspark_jars_dir()
    runtime = iceberg_runtime_jar()
    jackson = sorted(p for p in spark_jars.glob("jackson-*.jar") if p.name.startswith(_JACKSON_JARS))
    if len(jackson) != len(_JACKSON_JARS):
        raise RuntimeError(f"expected pyspark's jackson core/databind/annotations jars in {spark_jars}")
    sources, boot = _java_sources(), _java_sources("boot")
    root = (cache_dir or default_cache_dir()) / "jvm"
    target = root / _cache_key(runtime, jackson, sources, boot)
    result = JvmClasspath(runtime, target / "iceberg-shaded-jackson.jar", target / "tabletopic-writer.jar",
                          boot_jar=target / "tabletopic-boot.jar")
    if target.exists():
        return result
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.exists():  # another process built it while we waited
            return result
        _java, javac = find_java(need_javac=True)
        assert javac is not None
        staging = Path(tempfile.mkdtemp(prefix=".build-", dir=root))
        try:
            relocate_jars(jackson, staging / result.shaded_jackson_jar.name, _JACKSON)
            compile_jar(javac, sources, [*spark_jars.glob("*.jar"), runtime, staging / result.shaded_jackson_jar.name],
                     staging / result.writer_jar.name)
            assert result.boot_jar is not None
            compile_jar(javac, boot, spark_jars.glob("*.jar"), staging / result.boot_jar.name)
            os.rename(staging, target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return result


if __name__ == "__main__":  # used by the container build to warm the cache; --lake adds S3/REST/Glue
    print("\n".join(str(p) for p in build_classpath(lake="--lake" in sys.argv[1:]).jars), file=sys.stdout)
