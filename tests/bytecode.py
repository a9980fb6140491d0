"""The project's modules compiled once, before the workers start.

An editable install leaves ``daemon/`` and ``plugins/`` uncompiled, and with ``PYTHONDONTWRITEBYTECODE=1``
set (the machines the suite's times were measured on set it) no process keeps what it compiled: every
worker, and every daemon and command a test starts, compiled the same modules again, up to 0.4 s of CPU
each time. ``compileall`` writes the bytecode whatever that setting says, and on a later run only looks
at the files' times.
"""

from __future__ import annotations

import compileall
from pathlib import Path

import pytest

_ROOT = Path(__file__).resolve().parent.parent
_SOURCES = ("daemon", "plugins", "tests")


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return  # the controller compiled them before it started this worker
    for folder in _SOURCES:
        compileall.compile_dir(_ROOT / folder, quiet=1)
