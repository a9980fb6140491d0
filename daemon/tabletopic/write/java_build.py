"""Compile Java sources into a jar with the JDK's javac: the one place tabletopic runs a compiler."""

from __future__ import annotations

import os
import subprocess
import tempfile
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path


def compile_jar(javac: Path, sources: Mapping[str, bytes], classpath: Iterable[Path], jar: Path) -> None:
    """Compile ``sources`` (path in the source tree -> text) for Java 17 and write their classes to ``jar``."""
    with tempfile.TemporaryDirectory() as work:
        src, out = Path(work, "src"), Path(work, "classes")
        files = []
        for name, text in sources.items():
            path = src / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(text)
            files.append(str(path))
        out.mkdir()
        cmd = [str(javac), "--release", "17", "-nowarn", "-d", str(out),
               "-cp", os.pathsep.join(str(p) for p in classpath), *files]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"javac failed building {jar.name}:\n{proc.stderr}")
        with zipfile.ZipFile(jar, "w", zipfile.ZIP_DEFLATED) as zf:
            for path in sorted(out.rglob("*.class")):
                zf.write(path, path.relative_to(out).as_posix())
