"""Table shaping: the tables a batch goes to, made ready for it, and its rows put in each one's shape.

:meth:`TableShaper.open` makes, in threads and side by side, every catalog call a batch needs: tables
loaded or created, schemas evolved, tables that only deletes go to looked up, what each new table
records read. :meth:`TableShaper.prepare` then conforms the rows on the event loop, with no catalog
call: a row that does not fit fails alone, with why, and the others keep their batch.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa
import structlog

from tabletopic.buffer.partition_ledger import PartitionLedger
from tabletopic.convert.converter import Failure
from tabletopic.convert.key_rows import key_columns
from tabletopic.convert.records import UPSERT, SinkRecords
from tabletopic.core.record_faults import bisect
from tabletopic.core.topic_partition import TopicPartition
from tabletopic.write.arrow_conform import ConformError, conform
from tabletopic.write.column_conversion import JAVA_RULES, ConversionRules
from tabletopic.write.iceberg_tables import IcebergTables
from tabletopic.write.java_errors import JAVA_ERRORS, JavaErrorKind, classify, java_error_message
from tabletopic.write.new_columns import new_column_types
from tabletopic.write.schema_evolution import EvolutionError, plan
from tabletopic.write.schema_evolution import apply as apply_changes
from tabletopic.write.table_handle import CATALOG_ERRORS, CatalogUnavailable, TableError, TableHandle

log = structlog.get_logger(__name__)
_EVOLVE_ATTEMPTS = 5


@dataclass
class _Opening:
    """What :meth:`TableShaper.open` does for one table, in a thread, and what it found."""

    table: str
    upserts: list[SinkRecords]  # the records that are not deletes: a table is created from the first
    load: bool  # not loaded yet
    read: bool  # what it records is not known yet
    evolve: bool = False
    absent: bool = False  # only deletes go to it, and it does not exist


class TableShaper:
    """Runs on the event loop, but for :meth:`open`'s catalog calls, which run on a pool of their own
    (``parallelism`` at once, as many as tables commit in parallel) so that they wait behind nothing
    else the process runs."""

    def __init__(self, tables: IcebergTables, ledger: PartitionLedger, connector: str, case_insensitive: bool,
                 evolve_schema: bool = False, parallelism: int = 1, rules: ConversionRules = JAVA_RULES) -> None:
        self._tables = tables
        self._ledger = ledger
        self._case_insensitive = case_insensitive
        self._evolve_schema = evolve_schema
        self._rules = rules  # how a value goes into a column of another type
        self._opens = ThreadPoolExecutor(parallelism, thread_name_prefix=f"open-{connector}")

    def close(self) -> None:
        """Stop the pool; an open still running ends on its own, and nobody waits for it."""
        self._opens.shutdown(wait=False, cancel_futures=True)

    async def open(self, changes: dict[str, list[SinkRecords]]) -> frozenset[str]:
        """Do, off the event loop, every catalog call :meth:`prepare` and the writer's ``buffer`` would make for
        ``changes``: load or create the tables not loaded yet, look up those that only deletes go to,
        evolve the schemas the records need, and read what each new table records. Tables open side by
        side, as many at once as tables commit in parallel. Returns the tables that only deletes go to
        and that do not exist, which :meth:`prepare` then drops without asking the catalog again.

        A table that cannot be opened or evolved is left to :meth:`prepare` and the writer's ``buffer``,
        which turn why into the records' failures, or into a system failure.
        """
        jobs: list[_Opening] = []
        for table, records in changes.items():
            upserts = [r for r in records if (r.op_array() == UPSERT).any()]
            opening = _Opening(table, upserts, load=not self._tables.loaded(table),
                               read=not self._ledger.knows(table))
            if not opening.load and self._evolve_schema:
                # Planning reads only the loaded schema: a table whose records fit it costs no thread.
                handle = self._tables.get(table)
                opening.evolve = any(self._changes(handle, r) for r in upserts)
            else:
                opening.evolve = self._evolve_schema and bool(upserts)
            if opening.load or opening.read or opening.evolve:
                jobs.append(opening)
        if not jobs:
            return frozenset()
        loop = asyncio.get_running_loop()

        async def one(opening: _Opening) -> None:
            recorded = await loop.run_in_executor(self._opens, self._open_sync, opening)
            if recorded is not None:
                self._ledger.learn(opening.table, recorded)

        outcomes = await asyncio.gather(*(one(o) for o in jobs), return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        return frozenset(o.table for o in jobs if o.absent)

    def _open_sync(self, opening: _Opening) -> dict[TopicPartition, int] | None:
        """One table's catalog calls, in a thread; what the table records, if it was to be read."""
        table = opening.table
        if opening.load:
            try:
                if opening.upserts:  # as prepare: a table is created from its first rows that are not deletes
                    self._tables.get(table, _column_types(opening.upserts[0]))
                elif table in self._tables.known() or self._tables.exists(table):
                    self._tables.get(table)
                else:
                    opening.absent = True
                    return None
            except TableError:
                return None
        if opening.evolve:
            handle = self._tables.get(table)
            for records in opening.upserts:
                try:
                    handle = self._evolve(handle, records)
                except EvolutionError:
                    break  # prepare plans again, and fails these records with why
        # A thousand new tables' reads, one py4j call each, held the event loop for seconds.
        if opening.read and self._tables.loaded(table):
            with contextlib.suppress(*CATALOG_ERRORS):  # the task reads it again, with the outage's backoff
                return self._ledger.read_recorded(table)
        return None

    def prepare(self, table: str, records: SinkRecords,
                absent: Collection[str] = ()) -> tuple[list[SinkRecords], list[Failure]]:
        """Conform rows to ``table``; nothing is buffered yet. After :meth:`open` of these records it
        makes no catalog call (``absent``: what it answered); without it, it makes them itself."""
        ops = records.op_array()
        if not (ops == UPSERT).any() and table not in self._tables.known() and (
                table in absent or not self._tables.exists(table)):
            return [], []  # deleting keys from a table that does not exist yet changes nothing
        handle = self._tables.get(table, None if self._tables.loaded(table) else _column_types(records))
        failures: list[Failure] = []
        if self._evolve_schema and (ops == UPSERT).any():
            try:
                handle = self._evolve(handle, records)
            except EvolutionError as exc:
                return [], [Failure(int(r), str(exc)) for r in records.rows]
        if not handle.keyed:
            return self._conform(handle, records, failures), failures
        parts = []
        upserts = ops == UPSERT
        if upserts.any():
            parts += self._conform(handle, records.take(upserts) if not upserts.all() else records, failures)
        if not upserts.all():
            parts += self._conform_keys(handle, records.take(~upserts), failures)
        parts = [self._without_null_keys(handle, p, failures) for p in parts]
        if len(parts) > 1:  # deletes and upserts were conformed apart; restore offset order
            merged = replace(records, value=pa.concat_tables([p.value for p in parts]),
                             offsets=np.concatenate([p.offsets for p in parts]),
                             timestamps=np.concatenate([p.timestamps for p in parts]),
                             rows=np.concatenate([p.rows for p in parts]),
                             ops=np.concatenate([p.op_array() for p in parts]))
            order = np.argsort(merged.offsets, kind="stable")
            parts = [replace(merged, value=merged.value.take(pa.array(order)), offsets=merged.offsets[order],
                             timestamps=merged.timestamps[order], rows=merged.rows[order], ops=merged.ops[order])]
        return [p for p in parts if len(p)], failures

    def _changes(self, handle: TableHandle, records: SinkRecords) -> bool:
        """Whether ``records`` need the table's schema changed: planned only, no catalog call."""
        try:
            return bool(plan(handle.arrow_schema, records.value.schema, handle.name, self._case_insensitive,
                             handle.id_columns, records.schemaless))
        except EvolutionError:
            return False  # nothing to apply: prepare fails the records with why

    def _evolve(self, handle: TableHandle, records: SinkRecords) -> TableHandle:
        schema = records.value.schema
        for attempt in range(1, _EVOLVE_ATTEMPTS + 1):
            changes = plan(handle.arrow_schema, schema, handle.name, self._case_insensitive, handle.id_columns,
                           records.schemaless)
            if records.schemaless and schema is records.value.schema and any(c.kind == "add" for c in changes):
                # A new column's type: a field of timestamp strings becomes a timestamp column.
                schema = new_column_types(records.value)
                changes = plan(handle.arrow_schema, schema, handle.name, self._case_insensitive,
                               handle.id_columns, True)
            if not changes:
                return handle
            try:
                apply_changes(self._tables.jvm, handle.java, changes)
            except JAVA_ERRORS as exc:
                # Iceberg retries snapshot commits but not a schema update: the coordinator's commit
                # of the round before lands in between often. Plan again on the new metadata.
                if classify(exc) is not JavaErrorKind.CONFLICT or attempt == _EVOLVE_ATTEMPTS:
                    raise CatalogUnavailable(f"cannot evolve table {handle.name}: {java_error_message(exc)}") from exc
                log.info("schema update raced another commit; planning it again", table=handle.name,
                         attempt=attempt)
                handle = self._tables.refresh(handle.name)
                continue
            log.info("evolved table schema", table=handle.name, changes=[str(c) for c in changes])
            return self._tables.refresh(handle.name)
        raise AssertionError("unreachable")

    def _conform_keys(self, handle: TableHandle, records: SinkRecords,
                      failures: list[Failure]) -> list[SinkRecords]:
        """Deletes need only the id columns; the other columns of the table are left null."""
        key_schema = pa.schema([handle.arrow_schema.field(c) for c in handle.id_columns])
        try:
            keys = conform(key_columns(records.value, handle.id_columns), key_schema, handle.name,
                           self._case_insensitive, self._rules)
        except ConformError as exc:
            failures.extend(Failure(int(r), f"delete key: {exc}") for r in records.rows)
            return []
        columns = [keys.column(f.name) if f.name in handle.id_columns else pa.nulls(len(records), f.type)
                   for f in handle.arrow_schema]
        return [records.with_value(pa.Table.from_arrays(columns, schema=handle.arrow_schema))]

    @staticmethod
    def _without_null_keys(handle: TableHandle, records: SinkRecords, failures: list[Failure]) -> SinkRecords:
        null = np.zeros(len(records), dtype=bool)
        for column in handle.id_columns:
            null |= np.asarray(records.value.column(column).is_null().to_numpy(zero_copy_only=False), dtype=bool)
        if not null.any():
            return records
        failures.extend(Failure(int(r), f"id columns {handle.id_columns} must not be null") for r in records.rows[null])
        return records.take(~null)

    def _conform(self, handle: TableHandle, records: SinkRecords, failures: list[Failure]) -> list[SinkRecords]:
        """The rows in the table's shape; the rows that do not fit fail alone, the others keep their batch."""
        def attempt(lo: int, hi: int) -> SinkRecords:
            part = records.between(lo, hi)
            return part.with_value(conform(part.value, handle.arrow_schema, handle.name, self._case_insensitive,
                                           self._rules))

        return bisect(len(records), attempt, lambda i, exc: failures.append(Failure(int(records.rows[i]), str(exc))),
                      faults=(ConformError,))


def _column_types(records: SinkRecords) -> pa.Schema:
    """The types a new table's columns take from ``records`` (see :mod:`tabletopic.write.new_columns`)."""
    return new_column_types(records.value) if records.schemaless else records.value.schema
