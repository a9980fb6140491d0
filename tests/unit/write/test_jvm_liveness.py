"""The liveness check: a process killed, exiting or gone is never alive, and a JVM that does not
answer within the bound is not either."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from tabletopic.write.jvm_liveness import JvmLiveness, process_dying


def test_a_running_process_is_alive_and_a_killed_one_is_not_from_the_kill_on() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert process_dying(Path("/proc"), child.pid) is None
        os.kill(child.pid, signal.SIGKILL)
        # Right after the kill returns, whatever the child's teardown has reached.
        assert process_dying(Path("/proc"), child.pid) is not None
        child.wait()
        assert "gone" in (process_dying(Path("/proc"), child.pid) or "")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def _fake_proc(root: Path, pid: int, state: str, flags: int, sigpnd: str = "0", shdpnd: str = "0") -> Path:
    where = root / str(pid)
    where.mkdir(parents=True)
    rest = [state, "1", "1", "1", "0", "-1", str(flags)] + ["0"] * 40
    (where / "stat").write_text(f"{pid} (java (weird) name) {' '.join(rest)}\n")
    (where / "status").write_text(f"Name:\tjava\nSigPnd:\t{sigpnd.zfill(16)}\nShdPnd:\t{shdpnd.zfill(16)}\n")
    return root


def test_states_flags_and_pending_kills_are_read_past_a_name_with_parentheses(tmp_path: Path) -> None:
    assert process_dying(_fake_proc(tmp_path / "a", 7, "S", 0x400000), 7) is None
    assert "exiting" in (process_dying(_fake_proc(tmp_path / "b", 7, "Z", 0), 7) or "")
    assert "exiting" in (process_dying(_fake_proc(tmp_path / "c", 7, "R", 0x400004), 7) or "")
    assert "killed" in (process_dying(_fake_proc(tmp_path / "d", 7, "R", 0, sigpnd="100"), 7) or "")
    assert "killed" in (process_dying(_fake_proc(tmp_path / "e", 7, "S", 0, shdpnd="4100"), 7) or "")
    assert process_dying(_fake_proc(tmp_path / "f", 7, "S", 0, sigpnd="4000"), 7) is None  # SIGTERM: not dead


class _Runtime:
    """Stands in for SparkRuntime's process view: this test is about the bound, not about Spark."""

    def __init__(self, answer: threading.Event) -> None:
        self.started = True
        self.answer = answer
        self.calls = 0

    def jvm_exit(self) -> int | None:
        return None

    def jvm_pid(self) -> int:
        return os.getpid()

    def ping(self) -> None:
        self.calls += 1
        self.answer.wait()


def test_a_jvm_that_does_not_answer_is_down_and_probes_share_one_call() -> None:
    answer = threading.Event()
    runtime = _Runtime(answer)
    liveness = JvmLiveness(runtime, timeout_s=0.2)  # type: ignore[arg-type]

    async def probes() -> list[str | None]:
        return list(await asyncio.gather(*(liveness.check() for _ in range(5))))

    try:
        results = asyncio.run(probes())
        assert all(r is not None and "did not answer within 0.2 s" in r for r in results)
        assert runtime.calls == 1
        answer.set()
        assert asyncio.run(liveness.check()) is None
    finally:
        answer.set()
        liveness.close()
