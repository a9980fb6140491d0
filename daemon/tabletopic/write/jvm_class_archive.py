"""The driver JVM's class-data archive (Java's AppCDS): the classes a start loads, written once by a JVM as
it exits, and mapped by every later start instead of being read from the jars, parsed and verified again.

A start spends most of its CPU on those classes, so a restart after a crash or a deployment is that much
sooner back at work (``bench/jvm_start.py`` measures it). Nothing depends on the archive: whatever goes
wrong with it, the JVM starts as it would without one.

One archive per Java, classpath and options (:func:`archive_key`), in ``<cache>/class-archives``:

* ``<key>.jsa`` is the archive every start uses once it exists;
* until then, one start is the writer: its JVM writes ``<key>.<id>.part`` as it exits, and ``<id>.pid``
  says which JVM that is;
* the next start takes a part whose JVM has exited and that Java opens (``java -version`` with it), and
  renames it into place. A JVM killed while it wrote leaves a part Java refuses: that part is removed.
* an archive no start has mapped for a month (an older Java, other jars or options) is removed.

Thread affinity: called once per process, by whoever starts the JVM, before and after its launch.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import structlog

log = structlog.get_logger(__name__)

_QUIET = "-Xlog:cds*=off"  # a classpath that no longer matches is not worth a warning line: it starts without
_STALE_PART_S = 24 * 3600  # a part with no pid file beside it: its writer never said it started
# An archive no start mapped for this long is for an older Java, other jars or options: 100 MB or more each.
_UNUSED_S = 30 * 24 * 3600
_CHECK_TIMEOUT_S = 30


def archive_key(java: Path, classpath: Sequence[str], options: str) -> str:
    """Which archive fits a JVM: its Java (a new build lays out classes anew), its classpath in order, with each
    jar's size and time (an archive records both), and the options it was started with."""
    binary = java.resolve()
    parts: list[object] = [str(binary), _stamp(binary), options]
    for entry in classpath:
        path = Path(entry)
        parts.append([entry, _stamp(path) if path.is_file() else None])
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:20]


@dataclass(frozen=True)
class ArchiveStart:
    """What one JVM start does about the archive."""

    options: tuple[str, ...]  # for the JVM's command line
    use: Path | None = None  # the archive mapped, if one is
    part: Path | None = None  # where this JVM writes one as it exits, if it is the writer

    def launched(self, jvm_pid: int | None) -> None:
        """Say which JVM writes :attr:`part`, so that a later start knows when it is done."""
        if self.part is not None and jvm_pid is not None:
            with contextlib.suppress(OSError):
                _pid_file(self.part).write_text(str(jvm_pid))


class ClassArchives:
    """The archives of one cache directory."""

    def __init__(self, directory: Path, java: Path) -> None:
        self._dir = directory
        self._java = java

    def start(self, key: str) -> ArchiveStart:
        """How the next JVM of ``key`` starts: mapping the archive, writing it, or neither (another JVM is
        to write it, or the directory cannot be written)."""
        final = self._dir / f"{key}.jsa"
        try:
            self._dir.mkdir(parents=True, exist_ok=True)
            self._drop_unused(keep=final)
            self._settle(key, final)
            if not final.exists():
                if any(_alive(pid) for pid in self._dir.glob(f"{key}.*.pid")):
                    return ArchiveStart((_QUIET,))
                part = self._dir / f"{key}.{uuid.uuid4().hex[:12]}.part"
                return ArchiveStart((_QUIET, f"-XX:ArchiveClassesAtExit={part}"), part=part)
        except OSError as exc:
            log.info("the JVM starts without a class archive", directory=str(self._dir), reason=str(exc))
            return ArchiveStart(())
        with contextlib.suppress(OSError):
            os.utime(final)  # in use: see _drop_unused
        return ArchiveStart((_QUIET, f"-XX:SharedArchiveFile={final}"), use=final)

    def _drop_unused(self, keep: Path) -> None:
        """Remove the archives no start has mapped for a month, but ``keep``, and the parts of writers that
        exited as long ago: nothing would use them again."""
        cutoff = time.time() - _UNUSED_S
        for path in self._dir.glob("*.jsa"):
            with contextlib.suppress(FileNotFoundError):
                if path != keep and path.stat().st_mtime < cutoff:
                    path.unlink()
        for part in self._dir.glob("*.part"):
            with contextlib.suppress(FileNotFoundError):
                if part.stat().st_mtime < cutoff and not _alive(_pid_file(part)):
                    part.unlink()
                    _pid_file(part).unlink(missing_ok=True)

    def _settle(self, key: str, final: Path) -> None:
        """What writers that exited left: the first part Java opens becomes ``final`` if there is none yet;
        the others go (refused, or written beside one taken already), with the pid files of JVMs that
        exited without writing one (killed)."""
        for pid in sorted(self._dir.glob(f"{key}.*.pid")):
            if _alive(pid):
                continue
            part = pid.with_suffix(".part")
            if part.exists() and not final.exists() and self._opens(part):
                with contextlib.suppress(FileNotFoundError):  # another start took it first
                    os.replace(part, final)
                    log.info("class archive made", archive=str(final), bytes=final.stat().st_size)
            part.unlink(missing_ok=True)
            pid.unlink(missing_ok=True)
        for part in self._dir.glob(f"{key}.*.part"):
            # No pid file: its writer's start never said which JVM it was.
            if not _pid_file(part).exists() and time.time() - part.stat().st_mtime > _STALE_PART_S:
                part.unlink(missing_ok=True)

    def _opens(self, archive: Path) -> bool:
        """Whether Java maps ``archive``: a truncated one makes it abort, a whole one start."""
        # A JVM that aborts writes a crash report (30 KB) into its working directory, the daemon's. This
        # check's abort is expected: its report goes beside the archive, and is removed.
        report = archive.with_suffix(".check.log")
        try:
            run = subprocess.run([str(self._java), _QUIET, f"-XX:ErrorFile={report}", "-XX:-CreateCoredumpOnCrash",
                                  f"-XX:SharedArchiveFile={archive}", "-version"],
                                 capture_output=True, timeout=_CHECK_TIMEOUT_S, cwd=self._dir)
        except (OSError, subprocess.TimeoutExpired):
            return False
        finally:
            report.unlink(missing_ok=True)
        return run.returncode == 0


def _alive(pid_file: Path) -> bool:
    """Whether the JVM a pid file names still runs (a writer writes its part as it exits)."""
    try:
        os.kill(int(pid_file.read_text()), 0)
    except (FileNotFoundError, ProcessLookupError, ValueError):
        return False
    except PermissionError:  # alive, under another user
        return True
    return True


def _pid_file(part: Path) -> Path:
    return part.with_suffix(".pid")


def _stamp(path: Path) -> list[int]:
    stat = path.stat()
    return [stat.st_size, int(stat.st_mtime)]
