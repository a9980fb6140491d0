"""The layers of setup.cfg hold: every module sits in one, and none imports from a layer above it."""

from __future__ import annotations

import configparser
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "daemon" / "tabletopic"


def _layers() -> list[str]:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    lines = config["importlinter:contract:layers"]["layers"].split("\n")
    return [name.strip() for line in lines for name in line.replace(":", "|").split("|") if name.strip()]


def test_every_module_of_the_daemon_sits_in_one_layer() -> None:
    modules = {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    modules |= {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    layers = _layers()
    assert sorted(modules - set(layers)) == [], "modules in no layer"
    assert sorted(set(layers) - modules) == [], "layers naming no module"
    assert len(layers) == len(set(layers)), "a module in two layers"


def test_no_module_imports_from_a_layer_above_its_own() -> None:
    run = subprocess.run([str(Path(sys.executable).parent / "lint-imports"), "--no-cache"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "0 broken" in run.stdout


def test_every_module_but_the_writer_is_kept_from_the_jvm() -> None:
    """A new module is in the JVM contract's sources too, or py4j could come back anywhere."""
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    sources = set(config["importlinter:contract:jvm"]["source_modules"].split())
    assert sorted({f"tabletopic.{name}" for name in _layers()} - {"tabletopic.write"} - sources) == []
    assert "tabletopic.write" not in sources and "tabletopic_plugins" in sources


def test_no_module_but_the_writer_reaches_into_the_jvm() -> None:
    """py4j's way in is an attribute, not an import: ``x.jvm.org.apache...``, a session's ``_jsparkSession``,
    ``spark.java_class(...)``, a handle's Java table (``handle.java``) or Spark's context would pass the contract.
    Outside ``write/`` the JVM is reached only through the writer's typed calls."""
    reach = re.compile(r"\bjvm\.|_jsparkSession|\._gateway|\bpy4j\.\w|\.java_class\("
                       r"|[\w)\]]\.java\b(?![\"'/])|\bsparkContext\b")
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
             for root in (PACKAGE, ROOT / "plugins")
             for path in sorted(root.rglob("*.py")) if "write" not in path.relative_to(root).parts[:1]
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if reach.search(line) and not line.lstrip().startswith("#")]
    assert found == []


def test_docs_layout_names_every_module() -> None:
    """docs/layout.md says what each module does: a module it does not name is a module nobody described."""
    text = (ROOT / "docs" / "layout.md").read_text()
    lines = text.splitlines()
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if path.name == "__init__.py" or rel.startswith("demo/") or rel in text:
            continue
        package = rel.rsplit("/", 1)[0]
        # "registry/avro_schema.py, avro_compatibility.py": a line of the package names its sibling.
        if not any(line.startswith(package + "/") and path.name in line for line in lines):
            missing.append(rel)
    assert missing == []
