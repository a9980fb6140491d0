"""The Java writer's own tests (``java/tabletopic/*Test.java`` here), on JUnit 5 and Iceberg's in-memory catalog.

The writer and its tests are compiled together with every lint of javac as an error, then run by
JUnit's console launcher (Debian's ``junit5`` package, which ``.ci/run`` installs).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tabletopic.write.jvm_classpath import build_classpath, find_java, pyspark_jars_dir

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
    classes = tmp_path / "classes"
    # C1 and the serial collector halve javac's CPU (7.5 s to 3.9 s here) for a compiler that lives seconds.
    compiled = subprocess.run([str(javac), "-J-XX:TieredStopAtLevel=1", "-J-XX:+UseSerialGC",
                               "--release", "17", "-Xlint:all,-path", "-Werror", "-proc:none",
                               "-d", str(classes), "-cp", os.pathsep.join([classpath, str(JUNIT)]), *sources],
                              capture_output=True, text=True)
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    # The JVM's own -cp, not the launcher's --class-path: only the JVM expands pyspark's jars/*.
    ran = subprocess.run([str(java), "-XX:TieredStopAtLevel=1",
                          "-cp", os.pathsep.join([str(classes), classpath, str(JUNIT)]),
                          "org.junit.platform.console.ConsoleLauncher", "--disable-banner", "--disable-ansi-colors",
                          "--details=tree", "--scan-class-path", str(classes), "--fail-if-no-tests"],
                         capture_output=True, text=True)
    assert ran.returncode == 0, ran.stdout[-20000:] + ran.stderr[-5000:]
