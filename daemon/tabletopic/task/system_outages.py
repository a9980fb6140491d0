"""Outages of a system the sink needs (catalog, storage, schema registry): retried with backoff, counted,
and reported; too many failures in a row, or an outage longer than ``errors.retry.timeout``, stop the
connector. The backoff doubles from 1 s up to ``errors.retry.delay.max.ms``; ``errors.retry.timeout=-1``
retries without end, as Connect's does.

An outage is logged as an operator wants it, however long it lasts: one warning when it starts, naming
what failed, a summary a minute while it lasts (failures, duration), and one info line when it ends.

A failure here is never the records' fault, so nothing is dead-lettered for it: the work is tried
again, and the records are read again from the first one not taken.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, TypeVar

from tabletopic.convert.isolation import SystemUnavailable
from tabletopic.observe.metrics import SinkMetrics
from tabletopic.write.java_errors import java_error_message
from tabletopic.write.table_handle import CATALOG_ERRORS, CatalogUnavailable

T = TypeVar("T")
SUMMARY_EVERY_S = 60.0


class SystemOutages:
    def __init__(self, max_in_a_row: int, metrics: SinkMetrics, log: Any, retry_timeout_ms: int = 0,
                 retry_delay_max_ms: int = 30_000, clock: Callable[[], float] = time.monotonic) -> None:
        self._max_in_a_row = max_in_a_row
        self._metrics = metrics
        self._log = log
        self._timeout_s = retry_timeout_ms / 1000  # 0: no bound of time; -1: no bound at all
        self._delay_max_s = max(0.001, retry_delay_max_ms / 1000)
        self.in_a_row = 0  # reset by work done without one
        self.last_error: str | None = None
        self._clock = clock
        self._backoff_until = 0.0  # when the backoff being waited out ends
        self._since = 0.0  # when the outage's first failure came
        self._told = 0.0  # when the outage was last logged
        metrics.system_unavailable.set(0)  # exported from the start: a dashboard shows 0, not "no data"

    async def failed(self, exc: SystemUnavailable) -> None:
        """Count ``exc`` and wait out its backoff; raise once tabletopic.catalog.max-consecutive-failures is reached.

        Failures met while a backoff runs (a fetch's partitions are ingested side by side) wait for the same
        end and are not counted: one outage seen by four partitions at once is one failure, not four.
        """
        now = self._clock()
        if now < self._backoff_until:
            await asyncio.sleep(self._backoff_until - now)
            return
        self.in_a_row += 1
        if self.in_a_row == 1:
            self._since = now
            self._metrics.system_unavailable.set(1)
        self.last_error = str(exc)
        self._metrics.catalog_failures.inc()
        if self.in_a_row >= self._max_in_a_row and self._timeout_s >= 0:
            raise type(exc)(f"{exc} ({self.in_a_row} failures in a row; "
                            "tabletopic.catalog.max-consecutive-failures)") from exc
        if self._timeout_s > 0 and now - self._since >= self._timeout_s:
            raise type(exc)(f"{exc} (out for {now - self._since:.0f} s; errors.retry.timeout)") from exc
        backoff = min(self._delay_max_s, 2.0 ** (self.in_a_row - 1))
        if self.in_a_row == 1:
            self._log.warning("a system the sink needs is unavailable; its records are read again once it answers",
                              error=str(exc), retry_in_s=backoff)
            self._told = now
        elif now - self._told >= SUMMARY_EVERY_S:
            self._log.warning("a system the sink needs is still unavailable", error=str(exc),
                              failures=self.in_a_row, out_for_s=round(now - self._since))
            self._told = now
        self._backoff_until = now + backoff
        await asyncio.sleep(backoff)

    def recovered(self) -> None:
        """Work went through: an outage, if there was one, has ended."""
        if self.in_a_row:
            self._log.info("the system the sink needs answers again", failures=self.in_a_row,
                           out_for_s=round(self._clock() - self._since), last_error=self.last_error)
            self._metrics.system_unavailable.set(0)
            self.in_a_row = 0

    async def read(self, read: Callable[[], T]) -> T:
        """``read()`` in a thread, retried with backoff while the catalog or storage fails."""
        while True:
            try:
                result = await asyncio.to_thread(read)
            except CATALOG_ERRORS as exc:
                why = exc if isinstance(exc, CatalogUnavailable) else CatalogUnavailable(java_error_message(exc))
                await self.failed(why)
                continue
            self.recovered()
            return result
