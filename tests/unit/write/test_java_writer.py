"""The Java writer's own tests (``java/tabletopic/*Test.java`` here), on JUnit 5 and Iceberg's in-memory catalog.

The writer and its tests are compiled together with every lint of javac as an error, then run by
JUnit's console launcher (Debian's ``junit5`` package, which ``.ci/run`` installs).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tabletopic.write.jvm_classpath import build_classpath, default_cache_dir, find_java, pyspark_jars_dir

HERE = Path(__file__).parent
WRITER = Path(__file__).parents[3] / "daemon" / "tabletopic" / "write" / "java" / "tabletopic"
JUNIT = Path("/usr/share/java/junit-platform-console-standalone.jar")


@pytest.mark.timeout(120)
def test_the_java_writer_compiles_without_a_warning_and_passes_its_junit_tests(tmp_path: Path) -> None:
    assert JUNIT.exists(), f"{JUNIT} is missing: install Debian's junit5 package (.ci/run does)"
    java, javac = find_java(need_javac=True)
    assert javac is not None
    paths = build_classpath()
    classpath = os.pathsep.join([str(pyspark_jars_dir() / "*"), str(paths.runtime_jar),
                                 str(paths.shaded_jackson_jar)])
    sources = sorted(map(str, [*WRITER.glob("*.java"), *(HERE / "java" / "tabletopic").glob("*.java")]))
    # C1 and the serial collector halve javac's CPU (7.5 s to 3.9 s here) for a compiler that lives seconds.
    command = [str(javac), "-J-XX:TieredStopAtLevel=1", "-J-XX:+UseSerialGC", "--release", "17", "-Xlint:all,-path",
               "-Werror", "-proc:none", "-cp", os.pathsep.join([classpath, str(JUNIT)])]
    jars = [*sorted(pyspark_jars_dir().glob("*.jar")), paths.runtime_jar, paths.shaded_jackson_jar, JUNIT]
    classes = _compiled(command, jars, sources, tmp_path)
    # The JVM's own -cp, not the launcher's --class-path: only the JVM expands pyspark's jars/*.
    ran = subprocess.run([str(java), "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
                          "-cp", os.pathsep.join([str(classes), classpath, str(JUNIT)]),
                          "org.junit.platform.console.ConsoleLauncher", "--disable-banner", "--disable-ansi-colors",
                          "--details=tree", "--scan-class-path", str(classes), "--fail-if-no-tests"],
                         capture_output=True, text=True)
    assert ran.returncode == 0, ran.stdout[-20000:] + ran.stderr[-5000:]


def _compiled(command: list[str], jars: list[Path], sources: list[str], tmp_path: Path) -> Path:
    """The classes javac made of ``sources``, kept by what went in: the same sources, compiler, flags and jars
    compile the same way, so only a change pays javac's 4 s of CPU again (a third of this test)."""
    digest = hashlib.sha256("\0".join(command).encode())
    for jar in jars:
        digest.update(f"{jar}:{jar.stat().st_size}:{jar.stat().st_mtime_ns}\0".encode())
    for source in sources:
        digest.update(source.encode() + b"\0" + Path(source).read_bytes())
    kept = default_cache_dir() / "junit"
    classes = kept / digest.hexdigest()[:16]
    if classes.is_dir():
        return classes
    built = tmp_path / "classes"
    compiled = subprocess.run([*command, "-d", str(built), *sources], capture_output=True, text=True)
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    kept.mkdir(parents=True, exist_ok=True)
    for older in kept.iterdir():  # only the newest compile is kept
        shutil.rmtree(older, ignore_errors=True)
    with contextlib.suppress(OSError):  # another run kept the same compile first
        shutil.move(str(built), classes)
    return classes if classes.is_dir() else built
