"""The driver JVM's class archive: one JVM writes it as it exits, the next start checks and takes it, and
whatever a killed or concurrent start leaves behind is never mapped."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tabletopic.write.jvm_class_archive import ClassArchives, archive_key
from tabletopic.write.jvm_classpath import JavaNotFoundError, find_java

try:
    JAVA = find_java(need_javac=False)[0]
except JavaNotFoundError:  # pragma: no cover - CI installs Java
    pytest.skip("no Java here", allow_module_level=True)
KEY = "k"


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def _run_writer(part: Path) -> None:
    """What the writer's JVM does as it exits: the archive of the classes it loaded."""
    subprocess.run([str(JAVA), "-Xlog:cds*=off", f"-XX:ArchiveClassesAtExit={part}", "-version"], check=True,
                   capture_output=True)


def test_the_first_start_writes_the_archive_the_next_one_maps_it(tmp_path: Path) -> None:
    archives = ClassArchives(tmp_path, JAVA)
    first = archives.start(KEY)
    assert first.part is not None and first.use is None
    assert f"-XX:ArchiveClassesAtExit={first.part}" in first.options
    first.launched(os.getpid())  # its JVM runs: no second writer meanwhile, and nothing mapped
    meanwhile = archives.start(KEY)
    assert (meanwhile.part, meanwhile.use) == (None, None) and not any("Archive" in o for o in meanwhile.options)

    _run_writer(first.part)
    first.launched(_dead_pid())  # and has exited
    second = archives.start(KEY)
    assert second.use == tmp_path / f"{KEY}.jsa" and second.part is None
    assert f"-XX:SharedArchiveFile={second.use}" in second.options
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{KEY}.jsa"]
    # Java maps it: the JVM says it shares classes.
    version = subprocess.run([str(JAVA), *second.options, "-version"], capture_output=True, text=True)
    assert version.returncode == 0 and "sharing" in version.stderr


def test_a_part_cut_short_by_a_kill_is_removed_and_never_mapped(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Java aborts on the cut part; its crash report goes nowhere the user would find it: not into the
    daemon's working directory, and not beside the archives."""
    workdir = tmp_path / "workdir"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    directory = tmp_path / "archives"
    archives = ClassArchives(directory, JAVA)
    first = archives.start(KEY)
    assert first.part is not None
    _run_writer(first.part)
    whole = first.part.read_bytes()
    first.part.chmod(0o644)
    first.part.write_bytes(whole[: len(whole) // 3])  # the JVM was killed while it wrote
    first.launched(_dead_pid())
    again = archives.start(KEY)
    assert again.use is None and again.part is not None and again.part != first.part  # a new writer
    assert not first.part.exists() and not (directory / f"{KEY}.jsa").exists()
    assert list(workdir.iterdir()) == list(directory.iterdir()) == []  # the new writer has written nothing yet


def test_a_part_written_beside_an_archive_already_taken_is_removed(tmp_path: Path) -> None:
    """Two writers: one JVM's start was told to write while the other's JVM, killed, had written nothing yet
    to see; the first part taken is the archive, and the second one goes when its JVM has exited."""
    archives = ClassArchives(tmp_path, JAVA)
    first = archives.start(KEY)
    assert first.part is not None
    _run_writer(first.part)
    first.launched(_dead_pid())
    second_part = tmp_path / f"{KEY}.second.part"
    _run_writer(second_part)
    second_part.with_suffix(".pid").write_text(str(os.getpid()))  # still writing: left alone
    assert archives.start(KEY).use == tmp_path / f"{KEY}.jsa" and second_part.exists()
    second_part.with_suffix(".pid").write_text(str(_dead_pid()))
    assert archives.start(KEY).use == tmp_path / f"{KEY}.jsa"
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{KEY}.jsa"]


def test_a_writer_killed_before_it_wrote_leaves_nothing_that_stops_the_next(tmp_path: Path) -> None:
    archives = ClassArchives(tmp_path, JAVA)
    first = archives.start(KEY)
    first.launched(_dead_pid())  # SIGKILL: no exit, so no part
    again = archives.start(KEY)
    assert again.part is not None and list(tmp_path.iterdir()) == []


def test_an_archive_no_start_mapped_for_a_month_is_removed_and_one_in_use_is_kept(tmp_path: Path) -> None:
    month_ago = time.time() - 31 * 24 * 3600
    for name in ("old-java.jsa", "k.jsa", "old-writer.part", "old-writer.pid"):
        (tmp_path / name).write_bytes(b"")
        os.utime(tmp_path / name, (month_ago, month_ago))
    (tmp_path / "old-writer.pid").write_text(str(_dead_pid()))
    os.utime(tmp_path / "old-writer.part", (month_ago, month_ago))
    (tmp_path / "recent.jsa").write_bytes(b"")
    start = ClassArchives(tmp_path, JAVA).start(KEY)  # k.jsa is this key's: mapped, so kept and marked in use
    assert start.use == tmp_path / "k.jsa" and (tmp_path / "k.jsa").stat().st_mtime > month_ago
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.jsa", "recent.jsa"]


def test_a_directory_that_cannot_be_made_means_a_start_without_an_archive(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    start = ClassArchives(tmp_path / "file" / "archives", JAVA).start(KEY)
    assert start.options == () and start.use is None and start.part is None


def test_the_key_follows_the_classpath_its_jars_and_the_options(tmp_path: Path) -> None:
    jar = tmp_path / "a.jar"
    jar.write_bytes(b"one")
    key = archive_key(JAVA, [str(jar)], "-Xmx1g")
    assert archive_key(JAVA, [str(jar)], "-Xmx1g") == key
    assert archive_key(JAVA, [str(jar)], "-Xmx2g") != key
    assert archive_key(JAVA, [str(jar), "/x.jar"], "-Xmx1g") != key
    jar.write_bytes(b"three")  # a rebuilt jar: its classes moved
    assert archive_key(JAVA, [str(jar)], "-Xmx1g") != key
