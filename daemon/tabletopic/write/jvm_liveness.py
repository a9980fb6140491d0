"""Whether the driver JVM is alive, decided when a probe asks.

A liveness probe must never hear "healthy" from a daemon whose JVM is gone. The exit
code shows only once the process has been reaped, and a JVM of a few GiB takes a
moment to die after SIGKILL, so each check reads the process's state from ``/proc``
(a pending SIGKILL, an exiting or dead process), then asks the gateway for a trivial
answer within a bound. One such call is in flight at a time, on a thread of its own
(a busy thread pool must not make a healthy JVM look dead); probes that arrive while
it runs share it.
"""

from __future__ import annotations

import asyncio
import contextlib
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from tabletopic.write.spark_session import SparkRuntime

DEFAULT_TIMEOUT_S = 1.0
_SIGKILL_BIT = 1 << (9 - 1)  # /proc/<pid>/status pending masks: bit n-1 for signal n
_PF_EXITING = 0x4  # /proc/<pid>/stat flags: the process has begun to exit


class JvmLiveness:
    def __init__(self, runtime: SparkRuntime, timeout_s: float = DEFAULT_TIMEOUT_S, proc: Path = Path("/proc")) -> None:
        self._runtime = runtime
        self._timeout_s = timeout_s
        self._proc = proc
        self._executor: ThreadPoolExecutor | None = None
        self._ping: Future[None] | None = None  # the call in flight; probes meanwhile share it

    async def check(self) -> str | None:
        """None while the JVM is alive and answers (or has not been started yet); otherwise why not."""
        if not self._runtime.started:
            return None
        code = self._runtime.jvm_exit()
        if code is not None:
            return f"the Spark driver JVM exited with code {code}"
        pid = self._runtime.jvm_pid()
        dying = process_dying(self._proc, pid) if pid is not None else None
        if dying is not None:
            return dying
        if self._ping is None or self._ping.done():
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="jvm-liveness")
            self._ping = self._executor.submit(self._runtime.ping)
        try:
            await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(self._ping)), self._timeout_s)
        except asyncio.TimeoutError:
            return f"the Spark driver JVM did not answer within {self._timeout_s:g} s"
        except Exception as exc:  # py4j's network errors: the gateway is gone
            return f"the Spark driver JVM does not answer: {type(exc).__name__}: {str(exc)[:200]}"
        return None

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None


def process_dying(proc: Path, pid: int) -> str | None:
    """Why process ``pid`` is gone or going, from ``/proc``; None if it looks alive."""
    try:
        stat = (proc / str(pid) / "stat").read_text()
        status = (proc / str(pid) / "status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return f"the Spark driver JVM (pid {pid}) is gone"
    except OSError:
        return None  # no /proc to read here: the gateway call decides
    # The command name may hold spaces and parentheses: the fields start after the last ')'.
    fields = stat[stat.rfind(")") + 2:].split()
    state, flags = fields[0], int(fields[6])
    if state in ("Z", "X", "x") or flags & _PF_EXITING:
        return f"the Spark driver JVM (pid {pid}) is exiting"
    for line in status.splitlines():
        if line.startswith(("SigPnd:", "ShdPnd:")):
            with contextlib.suppress(ValueError):
                if int(line.split()[1], 16) & _SIGKILL_BIT:
                    return f"the Spark driver JVM (pid {pid}) has been killed"
    return None
