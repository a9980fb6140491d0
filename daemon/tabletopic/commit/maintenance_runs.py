"""A connector's maintenance runs: started between its coordinator's rounds, under the coordinator's epoch.

The member owns the run under way (one at a time): it is interrupted when the coordinator resigns,
and stopped and awaited when the member stops.  A run keeps going only while the coordinator that
started it still holds the epoch it started under, so two daemons never maintain one table at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol


class TableMaintenance(Protocol):
    """What the runs need of the tables' maintenance (:class:`tabletopic.maintain.maintainer.Maintainer`)."""

    @property
    def max_file_wait_s(self) -> float: ...

    last_error: str | None  # the last table whose maintenance failed, and why; cleared by one that did not

    def due(self) -> list[str]: ...

    async def run(self, names: list[str], epoch: int, keep_going: Callable[[], bool]) -> None: ...

    def interrupt(self) -> None: ...

    def resume(self) -> None: ...


class MaintenanceRuns:
    def __init__(self, maintenance: TableMaintenance | None, name: str, log: Any) -> None:
        self._maintenance = maintenance
        self._name = name
        self._log = log
        self._running: asyncio.Task[None] | None = None  # owned: cancelled by interrupt(), awaited by stop()
        self._run_error: str | None = None  # why the last run itself failed; cleared by one that did not

    @property
    def last_error(self) -> str | None:
        """Why maintenance last failed: a run that failed as a whole, or a table it could not maintain."""
        table_error = self._maintenance.last_error if self._maintenance is not None else None
        return self._run_error or table_error

    @property
    def max_file_wait_s(self) -> float | None:
        """How long a file may wait for its commit before orphan removal may take it: None without maintenance."""
        return self._maintenance.max_file_wait_s if self._maintenance is not None else None

    def between_rounds(self, epoch: int, still_mine: Callable[[], bool]) -> None:
        """Start maintaining the tables that are due, unless a run is under way."""
        if self._maintenance is None or (self._running is not None and not self._running.done()):
            return
        names = self._maintenance.due()
        if not names:
            return
        self._maintenance.resume()
        self._running = asyncio.create_task(self._maintenance.run(names, epoch, still_mine),
                                            name=f"maintenance-{self._name}")
        self._running.add_done_callback(self._on_done)

    def _on_done(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        if task.exception() is not None:  # run() handles table failures itself
            self._run_error = str(task.exception())
            self._log.error("maintenance run failed", error=self._run_error)
        else:
            self._run_error = None

    def interrupt(self) -> None:
        """The role is lost: the run under way stops at its next step (its Spark job is cancelled)."""
        if self._maintenance is not None and self._running is not None:
            self._maintenance.interrupt()

    async def stop(self, timeout_s: float = 60.0) -> None:
        """Interrupt a run under way and wait for it (groups it committed stay)."""
        task, self._running = self._running, None
        if task is None or self._maintenance is None:
            return
        self._maintenance.interrupt()
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout_s)
        except asyncio.TimeoutError:
            self._log.warning("maintenance did not stop in time; its work is redone at the next run")
        except Exception:  # already reported by its done callback
            pass
