"""The JVM classpath: built once per version into a cache, safely from two processes at once."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tabletopic.core import exit_codes
from tabletopic.write.jar_relocation import Relocation, relocate_class
from tabletopic.write.jvm_classpath import JavaNotFoundError, build_classpath, find_java

BUILD = "from pathlib import Path; import sys; from tabletopic.write.jvm_classpath import build_classpath; " \
        "print(build_classpath(Path(sys.argv[1])).writer_jar)"


def test_two_processes_building_at_once_share_one_build(tmp_path: Path) -> None:
    procs = [subprocess.Popen([sys.executable, "-c", BUILD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    outputs = [p.communicate(timeout=300)[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert outputs[0] == outputs[1]
    builds = [d for d in (tmp_path / "jvm").iterdir() if d.is_dir()]
    assert len(builds) == 1 and not any(d.name.startswith(".build-") for d in builds)
    # Idempotent: a third call returns the same jars without building again.
    stamp = Path(outputs[0]).stat().st_mtime_ns
    again = build_classpath(tmp_path)
    assert str(again.writer_jar) == outputs[0] and again.writer_jar.stat().st_mtime_ns == stamp


def test_shaded_jackson_has_the_packages_iceberg_references(tmp_path: Path) -> None:
    classpath = build_classpath(tmp_path)
    with zipfile.ZipFile(classpath.shaded_jackson_jar) as jar:
        names = set(jar.namelist())
    assert "org/apache/iceberg/shaded/com/fasterxml/jackson/databind/ObjectMapper.class" in names
    assert not any(n.startswith("com/fasterxml/") for n in names)
    with zipfile.ZipFile(classpath.writer_jar) as jar:
        assert "tabletopic/SinkWriter.class" in jar.namelist()


def test_relocation_rewrites_the_constant_pool() -> None:
    relocation = Relocation("com.fasterxml.jackson", "org.apache.iceberg.shaded.com.fasterxml.jackson")
    with zipfile.ZipFile(next(Path(__import__("pyspark").__file__).parent.joinpath("jars")
                              .glob("jackson-databind-2*.jar"))) as jar:
        data = jar.read("com/fasterxml/jackson/databind/ObjectMapper.class")
    out = relocate_class(data, relocation)
    assert b"com/fasterxml/jackson/core/JsonFactory" not in out.replace(b"shaded/com/fasterxml", b"")
    assert b"org/apache/iceberg/shaded/com/fasterxml/jackson/core/JsonFactory" in out


def test_missing_java_says_what_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(JavaNotFoundError) as err:
        find_java()
    assert "openjdk-17-jdk-headless" in str(err.value) and "JAVA_HOME" in str(err.value)


def test_standalone_without_java_exits_with_that_message(tmp_path: Path) -> None:
    worker, connector = tmp_path / "w.properties", tmp_path / "c.properties"
    worker.write_text("bootstrap.servers=127.0.0.1:9\nlisteners=\n")
    connector.write_text(f"name=x\ntopics=t\niceberg.tables=db.t\niceberg.catalog.type=hadoop\n"
                         f"iceberg.catalog.warehouse=file://{tmp_path}/wh\n")
    env = {**os.environ, "PATH": str(Path(sys.executable).parent), "JAVA_HOME": ""}
    proc = subprocess.run([sys.executable, "-m", "tabletopic.cli", "standalone", str(worker), str(connector)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == exit_codes.CONFIG
    assert "needs a Java 17 JDK" in proc.stderr
