"""``tabletopic demo`` as a newcomer runs it first: on an empty warehouse, read top to bottom."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_LEVEL = re.compile(r"^\S+Z \[(?P<level>\w+)\s*\]")
# A Java stack frame, a "Caused by" or "... N more" line, however the log renders it.
_JAVA_FRAME = re.compile(r"^\s*(at [\w$.<>]+\(.*\)|Caused by: |\.\.\. \d+ more)")


@pytest.mark.slow
def test_the_demo_on_an_empty_warehouse_logs_nothing_alarming(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "tabletopic", "demo", "--records", "2000"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    out = _ANSI.sub("", proc.stdout + proc.stderr)
    assert proc.returncode == 0, out[-5000:]
    assert "iceberg.demo.clickstream: 2,000 rows (produced 2,000)" in out, out[-5000:]
    assert "iceberg.shop.shop_orders: 2,000 rows (produced 2,000)" in out, out[-5000:]
    lines = out.splitlines()
    levels = [m.group("level") for m in map(_LEVEL.match, lines) if m]
    # The lines above info, whole: a run on a loaded machine once logged a warning the report cut off.
    loud = [line for line in lines if (m := _LEVEL.match(line)) and m.group("level") != "info"]
    assert len(levels) > 20 and loud == [], "\n".join(loud)
    assert not [line for line in lines if _JAVA_FRAME.match(line)]
    assert list(tmp_path.iterdir()) == []  # it removes everything it made, Faust's data directories too
