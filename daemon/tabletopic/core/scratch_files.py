"""The process's files in the system's temporary directory: named after their owner, and swept once it is gone.

The Arrow streams and Parquet files a write hands to the JVM, and Faust's data directory, are removed when they are done
with, but a process that is killed (SIGKILL, the OOM killer, a container stopped hard) leaves them
behind, and a stream holds a table's buffered rows. Each name carries its owner, the process id and
its start time (a restarted container's daemon gets the same id again), so that a later daemon
removes what a dead one left, and never what a live one still uses.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import tempfile
from pathlib import Path

_NAME = re.compile(r"^tabletopic-(?P<kind>arrow|parquet|faust)-(?P<pid>\d+)\.(?P<start>\d+)-")


def prefix(kind: str) -> str:
    """The start of a scratch file's name for ``kind`` (``arrow``, ``parquet``, ``faust``), owned by this process."""
    return f"tabletopic-{kind}-{_owner(os.getpid())}-"


@functools.cache
def _owner(pid: int) -> str:
    # Read once per process, not for each of the thousand Arrow streams a round may write.
    return f"{pid}.{_start_ticks(pid) or 0}"


def sweep_dead(directory: str | None = None) -> list[str]:
    """Remove the scratch files of processes that are gone; return their names."""
    root = Path(directory or tempfile.gettempdir())
    removed: list[str] = []
    try:
        entries = list(root.iterdir())
    except OSError:
        return removed
    for entry in entries:
        owner = _NAME.match(entry.name)
        if owner is None or _alive(int(owner["pid"]), int(owner["start"])):
            continue
        try:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        except OSError:
            continue  # another daemon swept it first, or it is not ours to remove
        removed.append(entry.name)
    return removed


def _alive(pid: int, start: int) -> bool:
    ticks = _start_ticks(pid)
    if ticks is not None:
        return ticks == start
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: alive, and its files not ours
    return True  # running, where /proc cannot tell when it started


def _start_ticks(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot (Linux); None if unknown or not running."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])
