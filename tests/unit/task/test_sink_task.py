"""What the sink task makes sure of before it buffers rows: the ledger knows what their tables record."""

from __future__ import annotations

import asyncio

import structlog

from tabletopic.buffer.partition_ledger import PartitionLedger
from tabletopic.task.sink_task import learn_tables
from tabletopic.task.system_outages import SystemOutages
from tabletopic.write.table_handle import CatalogUnavailable
from tests.unit.fakes import TP0, metrics


class _Catalog:
    """What each table records, read in a thread; the first ``failures`` reads fail as a catalog would."""

    def __init__(self, recorded: dict[str, dict[tuple[str, int], int]], failures: int = 0) -> None:
        self.recorded = recorded
        self.failures = failures
        self.reads: list[str] = []

    def read(self, table: str) -> dict[tuple[str, int], int]:
        self.reads.append(table)
        if self.failures:
            self.failures -= 1
            raise CatalogUnavailable("catalog down")
        return self.recorded[table]


def _outages() -> SystemOutages:
    return SystemOutages(5, metrics(), structlog.get_logger(), retry_delay_max_ms=1)


def test_tables_known_are_not_read_and_unknown_ones_are_read_through_an_outage() -> None:
    catalog = _Catalog({"db.a": {TP0: 3}, "db.b": {TP0: 7}}, failures=2)
    ledger = PartitionLedger(catalog.read)
    ledger.learn("db.a", {TP0: 3})

    async def continues() -> bool:
        return True

    assert asyncio.run(learn_tables(ledger, _outages(), ["db.a", "db.b"], continues))
    assert catalog.reads == ["db.b"] * 3  # two failures, backed off, then the read
    assert ledger.floors("db.b") == {TP0: 7}


def test_a_reset_while_a_table_was_read_makes_it_read_again_before_rows_are_buffered() -> None:
    """The race the ledger's old synchronous read covered: what was learned is forgotten by a reset that
    comes while the task waits, so the task reads it again rather than buffer against nothing."""
    catalog = _Catalog({"db.a": {TP0: 3}})
    ledger = PartitionLedger(catalog.read)
    checks = 0

    async def continues() -> bool:
        nonlocal checks
        checks += 1
        if checks == 1:
            ledger.reset()  # a failed commit, while this batch waited on a decision
            catalog.recorded["db.a"] = {TP0: 9}  # and the table moved on meanwhile
        return True

    assert asyncio.run(learn_tables(ledger, _outages(), ["db.a"], continues))
    assert catalog.reads == ["db.a", "db.a"] and checks == 2
    assert ledger.floors("db.a") == {TP0: 9}


def test_records_that_may_no_longer_be_taken_are_not_taken() -> None:
    catalog = _Catalog({"db.a": {}})
    ledger = PartitionLedger(catalog.read)

    async def revoked() -> bool:
        return False

    assert not asyncio.run(learn_tables(ledger, _outages(), ["db.a"], revoked))
