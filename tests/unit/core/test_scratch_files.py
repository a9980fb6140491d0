import os
import subprocess
import sys
from pathlib import Path

from tabletopic.core import scratch_files


def _dead_owner() -> str:
    """The owner part of a name whose process has ended: a child that ran and was reaped."""
    child = subprocess.run([sys.executable, "-c", "from tabletopic.core import scratch_files; "
                            "print(scratch_files.prefix('arrow'))"], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    return child.stdout.strip().removeprefix("tabletopic-arrow-")


def test_what_a_dead_process_left_goes_and_what_a_live_one_uses_stays(tmp_path: Path) -> None:
    dead = _dead_owner()
    (tmp_path / f"tabletopic-arrow-{dead}abc.arrow").write_bytes(b"rows")
    (tmp_path / f"tabletopic-faust-{dead}xyz").mkdir()
    (tmp_path / f"tabletopic-faust-{dead}xyz" / "inside").write_text("x")
    ours = tmp_path / f"{scratch_files.prefix('arrow')}mine.arrow"
    ours.write_bytes(b"rows")
    # The same process id, started at another time: a restarted container's daemon left it.
    pid = os.getpid()
    earlier = tmp_path / f"tabletopic-faust-{pid}.1-old"
    earlier.mkdir()
    other = tmp_path / "tabletopic-key-123.pem"  # not a scratch name: never touched
    other.write_text("k")

    removed = scratch_files.sweep_dead(str(tmp_path))

    assert sorted(removed) == sorted([f"tabletopic-arrow-{dead}abc.arrow", f"tabletopic-faust-{dead}xyz",
                                      earlier.name])
    assert ours.exists() and other.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([ours.name, other.name])


def test_a_name_carries_this_process_and_when_it_started() -> None:
    name = scratch_files.prefix("faust")
    pid, start = name.removeprefix("tabletopic-faust-").rstrip("-").split(".")
    assert int(pid) == os.getpid() and int(start) > 0
