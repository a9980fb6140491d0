"""The project's modules compiled once, before the workers start.

An editable install leaves ``daemon/`` and ``plugins/`` uncompiled, and with ``PYTHONDONTWRITEBYTECODE=1``
set (the machines the suite's times were measured on set it) no process keeps what it compiled: every
worker, and every daemon and command a test starts, compiled the same modules again, up to 0.4 s of CPU
each time. ``compileall`` writes the bytecode whatever that setting says, and on a later run only looks
at the files' times.

pytest rewrites the asserts of every test module it imports, and keeps the result only where bytecode
may be written: with that setting, each worker rewrote and compiled every test module again, 4 of the
7 s a worker spent collecting the unit tests. So the run writes bytecode, in every worker.
"""

from __future__ import annotations

import compileall
import sys
from pathlib import Path

import pytest

_ROOT = Path(__file__).resolve().parent.parent
_SOURCES = ("daemon", "plugins", "tests")


def pytest_configure(config: pytest.Config) -> None:
    sys.dont_write_bytecode = False  # before the test modules are collected: their rewritten asserts are kept
    if hasattr(config, "workerinput"):
        return  # the controller compiled them before it started this worker
    for folder in _SOURCES:
        compileall.compile_dir(_ROOT / folder, quiet=1)
