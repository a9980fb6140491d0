"""How outages of the catalog, storage or registry are counted toward the connector's limit."""

from __future__ import annotations

import asyncio

import pytest
import structlog

from tabletopic.task.system_outages import SystemOutages
from tabletopic.write.table_handle import CatalogUnavailable
from tests.unit.fakes import metrics


def test_partitions_failing_together_count_as_one_failure_and_a_later_one_counts_again() -> None:
    """A fetch's partitions are ingested side by side: an outage meets all of them at once. Counted
    per partition, four partitions would exhaust a limit of three on the outage's first moment."""
    async def main() -> None:
        # Backoffs of at most 50 ms: what is counted does not depend on how long they are.
        outages = SystemOutages(3, metrics(), structlog.get_logger(), retry_delay_max_ms=50)
        down = CatalogUnavailable("catalog down")
        await asyncio.gather(*(outages.failed(down) for _ in range(4)))
        assert outages.in_a_row == 1
        await outages.failed(down)  # after the backoff: the outage goes on
        assert outages.in_a_row == 2
        with pytest.raises(CatalogUnavailable, match="3 failures in a row"):
            await outages.failed(down)

    asyncio.run(main())


@pytest.mark.parametrize(("timeout_ms", "failures_before_stop"), [(-1, None), (1, 2)])
def test_errors_retry_timeout_bounds_an_outage_by_time_or_lifts_every_bound(timeout_ms: int,
                                                                            failures_before_stop: int | None) -> None:
    """-1 retries without end (past the count); a timeout stops the connector once the outage has lasted it.
    The backoff is bounded by errors.retry.delay.max.ms, here 5 ms: longer than the 1 ms timeout."""
    async def main() -> None:
        outages = SystemOutages(3, metrics(), structlog.get_logger(), retry_timeout_ms=timeout_ms,
                                retry_delay_max_ms=5)
        down = CatalogUnavailable("catalog down")
        for n in range(1, 8):
            if failures_before_stop is not None and n == failures_before_stop:
                with pytest.raises(CatalogUnavailable, match=r"errors\.retry\.timeout"):
                    await outages.failed(down)
                return
            await outages.failed(down)
        assert outages.in_a_row == 7

    asyncio.run(main())


class _Lines:
    """A logger that keeps what it was asked to log."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str, dict[str, object]]] = []

    def __getattr__(self, level: str) -> object:
        return lambda event, **fields: self.lines.append((level, event, fields))


def test_an_outage_logs_once_when_it_starts_a_summary_a_minute_and_once_when_it_ends() -> None:
    """However often the work fails meanwhile: 100 failures 5 s apart are one warning, eight summaries
    (at 60 s, 120 s ... 480 s) and one info line, not a hundred warnings."""
    now = [0.0]
    log = _Lines()
    sink = metrics()

    async def main() -> None:
        outages = SystemOutages(1000, sink, log, retry_delay_max_ms=1, clock=lambda: now[0])
        for _ in range(100):
            await outages.failed(CatalogUnavailable("catalog down: connection refused"))
            assert sink.system_unavailable._value.get() == 1  # the metric carries the state meanwhile
            now[0] += 5.0
        outages.recovered()
        outages.recovered()  # work that goes on afterwards logs nothing more
        assert sink.system_unavailable._value.get() == 0

    asyncio.run(main())
    levels = [level for level, _, _ in log.lines]
    assert levels == ["warning"] + ["warning"] * 8 + ["info"]
    assert log.lines[0][2]["error"] == "catalog down: connection refused"
    assert [fields["out_for_s"] for _, _, fields in log.lines[1:9]] == list(range(60, 481, 60))
    assert log.lines[-1][2]["failures"] == 100 and log.lines[-1][2]["out_for_s"] == 500
