"""Records dynamic routing leaves out (``tabletopic.routing.unroutable=skip``): counted, and told once.

The Iceberg sink skips a record whose route field is null or absent, and one that names a table that
does not exist while auto-create is off, without a word. Here each is counted in
``tabletopic_skipped_records_total`` by why, and the log says so once for a connector's missing route
values and once per missing table, so that an operator learns of it without a line per record.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tabletopic.observe.metrics import SinkMetrics


class Unroutable:
    """One connector's skipped records. Event loop only.

    A table found missing is not asked for again for ``recheck_s`` (a commit interval): the Java sink
    asks again with each commit's new writers, and a record a second would otherwise cost a catalog call.
    """

    def __init__(self, metrics: SinkMetrics, log: Any, route_field: str | None, recheck_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._metrics = metrics
        self._log = log
        self._route_field = route_field
        self._recheck_s = recheck_s
        self._clock = clock
        self._told: set[str] = set()  # table names told of; "" for missing route values
        self._missing: dict[str, float] = {}  # table -> when it was found missing

    def known_missing(self, table: str) -> bool:
        """Whether ``table`` was found missing less than a recheck ago."""
        since = self._missing.get(table)
        return since is not None and self._clock() - since < self._recheck_s

    def no_route(self, records: int) -> None:
        self._metrics.skipped_records.labels(reason="no_route").inc(records)
        if "" not in self._told:
            self._told.add("")
            self._log.warning("records whose route field is null or absent are skipped, as the Iceberg sink "
                              "skips them (tabletopic.routing.unroutable=skip); counted in "
                              "tabletopic_skipped_records_total", route_field=self._route_field, records=records)

    def no_table(self, table: str, records: int) -> None:
        self._metrics.skipped_records.labels(reason="no_table").inc(records)
        if not self.known_missing(table):
            self._missing[table] = self._clock()
        if table not in self._told:
            self._told.add(table)
            self._log.warning("records routed to a table that does not exist are skipped, as the Iceberg sink "
                              "skips them with auto-create off (tabletopic.routing.unroutable=skip); counted in "
                              "tabletopic_skipped_records_total", table=table, records=records)
