"""The sink writer's answers: which floors its files were cut against, as commits land around writes."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from tabletopic.buffer.partition_ledger import PartitionLedger
from tabletopic.buffer.table_buffer import Drained
from tabletopic.convert.records import SinkRecords
from tabletopic.core.topic_partition import TopicPartition
from tabletopic.write.file_writer import WrittenFiles
from tabletopic.write.sink_writer import SinkWriter, shares
from tabletopic.write.table_handle import TableHandle
from tests.unit.fakes import TP0, metrics, run

TABLE = "db.t"
SCHEMA = pa.schema([("id", pa.int64())])


class _Tables:
    def get(self, name: str, sample: pa.Schema | None = None) -> TableHandle:
        return TableHandle(name, None, SCHEMA, 0, None)

    def known(self) -> set[str]:
        return {TABLE}

    def release_idle(self) -> list[str]:
        return []

    def loaded_count(self) -> int:
        return 1


def _written(drained: Drained) -> WrittenFiles:
    """One file of the drained rows, carrying the floors they were cut against (the same dict, as
    FileWriter passes it on)."""
    return WrittenFiles(drained.table, [{"file-path": f"/wh/{drained.table}/{id(drained)}"}], drained.records,
                        drained.max_timestamp_ms, 0.0, floors=drained.floors)


class _Files:
    """Writes nothing; each write waits for ``release`` when ``hold`` is set, to let a commit land meanwhile."""

    def __init__(self) -> None:
        self.hold, self.release, self.started = False, threading.Event(), threading.Event()

    def write_many(self, items: list[tuple[TableHandle, Drained]]) -> list[WrittenFiles]:
        self.started.set()
        if self.hold:
            self.release.wait(10)
        return [_written(drained) for _, drained in items]


class _Barrier:
    """Each job waits until ``parties`` jobs run at once (or fails at once if ``fail`` names one of its tables)."""

    def __init__(self, parties: int, fail: str | None = None) -> None:
        self.barrier, self.fail = threading.Barrier(parties, timeout=10), fail
        self.ended: list[str] = []
        self.jobs: list[list[str]] = []

    def write_many(self, items: list[tuple[TableHandle, Drained]]) -> list[WrittenFiles]:
        tables = [drained.table for _, drained in items]
        if self.fail in tables:
            raise RuntimeError(f"the JVM refused {self.fail}")
        self.barrier.wait()  # raises BrokenBarrierError unless every job runs at once
        self.ended.extend(tables)
        self.jobs.append(tables)
        return [_written(drained) for _, drained in items]


def _rows(tp: TopicPartition, first: int, end: int) -> SinkRecords:
    offsets = np.arange(first, end, dtype=np.int64)
    return SinkRecords(tp[0], tp[1], pa.table({"id": pa.array(offsets)}), offsets, offsets, offsets - first)


def _sink(recorded: dict[str, dict[TopicPartition, int]], files: _Files | _Barrier,
          parallelism: int = 1) -> tuple[SinkWriter, PartitionLedger]:
    ledger = PartitionLedger(lambda table: recorded.get(table, {}))
    writer = SinkWriter(_Tables(), files, metrics(), flush_bytes=1024, ledger=ledger,
                        parallelism=parallelism)
    return writer, ledger


def _buffer(writer: SinkWriter, ledger: PartitionLedger, table: str, rows: SinkRecords) -> None:
    if not ledger.knows(table):  # the sink task reads what a table records before it buffers
        ledger.learn(table, ledger.read_recorded(table))
    writer.buffer(table, [rows])


def _take(writer: SinkWriter, ledger: PartitionLedger, first: int, end: int) -> None:
    _buffer(writer, ledger, TABLE, _rows(TP0, first, end))
    ledger.accept(TP0, first, end)


def test_a_write_under_way_when_a_commit_lands_is_cut_against_the_new_floors() -> None:
    """An early write that began after an answer was cut, and ended after that answer committed, holds
    only rows past it: the next answer names the commit's floors, not a mix of old and new."""
    recorded: dict[str, dict[TopicPartition, int]] = {TABLE: {}}
    files = _Files()
    writer, ledger = _sink(recorded, files)

    async def scenario() -> Any:
        _take(writer, ledger, 0, 100)
        first = await writer.complete_write()
        assert first.written_floors[TABLE] == {}
        files.hold = True
        _take(writer, ledger, 100, 1000)  # over flush-bytes: written early
        writer.maybe_flush([TABLE])
        await asyncio.to_thread(files.started.wait, 10)
        recorded[TABLE] = {TP0: 100}  # the first answer lands while that write runs
        writer.committed({TP0: 100}, {TABLE: {TP0: 100}})
        files.release.set()
        await writer.wait_for_flushes()
        _take(writer, ledger, 1000, 1100)  # buffered after the commit: cut against its floors
        return await writer.complete_write()

    second = run(scenario())
    assert second.written_floors[TABLE] == {TP0: 100}
    assert second.written[TABLE].records == 1000 and second.positions == {TP0: 1100}


def test_files_cut_against_floors_a_commit_did_not_reach_stay_apart() -> None:
    """The rule raises a floor only to what the table now records: a commit that left another table's
    partition where it was leaves that table's files as they were cut."""
    recorded: dict[str, dict[TopicPartition, int]] = {TABLE: {TP0: 50}}
    files = _Files()
    writer, ledger = _sink(recorded, files)

    async def scenario() -> Any:
        ledger.seek(TP0, 50)
        _take(writer, ledger, 50, 1000)
        writer.maybe_flush([TABLE])
        await writer.wait_for_flushes()
        writer.committed({TP0: 40}, {TABLE: {TP0: 50}})  # not this table's record: nothing to raise
        return await writer.complete_write()

    result = run(scenario())
    assert result.written_floors[TABLE] == {TP0: 50}


def test_a_round_writes_its_tables_at_once_up_to_the_parallelism() -> None:
    """Three tables, three writes at once: each write waits at a barrier only all three together pass."""
    files = _Barrier(3)
    writer, ledger = _sink({}, files, parallelism=3)

    async def scenario() -> Any:
        for i, table in enumerate(("db.a", "db.b", "db.c")):
            _buffer(writer, ledger, table, _rows(("t", i), 0, 10))
            ledger.accept(("t", i), 0, 10)
        return await writer.complete_write()

    result = run(scenario())
    assert sorted(result.written) == ["db.a", "db.b", "db.c"] and sorted(files.ended) == sorted(result.written)


def test_many_tables_are_written_in_as_many_jobs_as_the_parallelism() -> None:
    """Seven tables, two jobs at once: each job writes a share of the tables, every table once."""
    files = _Barrier(2)
    writer, ledger = _sink({}, files, parallelism=2)
    tables = [f"db.t{i}" for i in range(7)]

    async def scenario() -> Any:
        for i, table in enumerate(tables):
            _buffer(writer, ledger, table, _rows(("t", i), 0, 10 * (i + 1)))
            ledger.accept(("t", i), 0, 10 * (i + 1))
        return await writer.complete_write()

    result = run(scenario())
    assert sorted(result.written) == tables
    assert len(files.jobs) == 2 and sorted(t for job in files.jobs for t in job) == tables


def test_shares_split_tables_by_bytes_and_never_make_an_empty_job() -> None:
    def drained(table: str, nbytes: int) -> Drained:
        return Drained(table, pa.table({"id": pa.array([], pa.int64())}), 0, nbytes, None, {}, None, None)

    big, *small = [drained("db.big", 900), *(drained(f"db.s{i}", 100) for i in range(9))]
    groups = shares([big, *small], 2)
    assert [sum(d.nbytes for d in g) for g in groups] == [900, 900] and groups[0] == [big]
    assert shares(small[:1], 4) == [small[:1]] and shares([], 4) == []


def test_a_failed_write_fails_the_answer_after_the_others_end() -> None:
    """No write is left running unwatched: the answer fails once every write has ended."""
    files = _Barrier(2, fail="db.b")
    writer, ledger = _sink({}, files, parallelism=3)

    async def scenario() -> None:
        for i, table in enumerate(("db.a", "db.b", "db.c")):
            _buffer(writer, ledger, table, _rows(("t", i), 0, 10))
            ledger.accept(("t", i), 0, 10)
        await writer.complete_write()

    with pytest.raises(RuntimeError, match=r"refused db\.b"):
        run(scenario())
    assert sorted(files.ended) == ["db.a", "db.c"]


def test_the_buffered_sums_follow_every_way_rows_come_and_go() -> None:
    """The sums are kept as rows come and go (summing every buffer per batch was too slow with many
    tables): they must equal the buffers' own after each way."""
    writer, ledger = _sink({}, _Files())

    def consistent() -> tuple[int, int]:
        held = (sum(b.records for b in writer.buffers), sum(b.nbytes for b in writer.buffers))
        assert (writer.buffered_records, writer.buffered_bytes) == held
        return held

    async def scenario() -> None:
        for i, table in enumerate(("db.a", "db.b", "db.c")):
            _buffer(writer, ledger, table, _rows(("t", i), 0, 10))
            ledger.accept(("t", i), 0, 10)
        assert consistent()[0] == 30
        await writer.complete_write()
        assert consistent() == (0, 0)
        _buffer(writer, ledger, "db.a", _rows(("t", 0), 10, 20))
        _buffer(writer, ledger, "db.b", _rows(("t", 1), 10, 20))
        writer.drop_below([("db.a", ("t", 0), 15)], "in a test")
        assert consistent()[0] == 15
        writer.release({("t", 1)})
        assert consistent()[0] == 5
        _buffer(writer, ledger, "db.c", _rows(("t", 2), 10, 200))  # over flush-bytes: written early
        writer.maybe_flush(["db.c"])
        await writer.wait_for_flushes()
        assert consistent()[0] == 5
        writer.reset()
        assert consistent() == (0, 0)

    run(scenario())


def test_a_revocation_while_a_round_writes_drops_that_write_and_its_answer() -> None:
    """The round's write may hold rows of the revoked partition and cannot be split: everything goes,
    the answer claims nothing, and the caller reads the partitions it keeps again."""
    files = _Files()
    writer, ledger = _sink({}, files)

    async def scenario() -> tuple[bool, Any]:
        _take(writer, ledger, 0, 100)
        files.hold = True
        answer = asyncio.ensure_future(writer.complete_write())
        await asyncio.to_thread(files.started.wait, 10)
        dropped_all = writer.release({TP0})
        files.release.set()
        return dropped_all, await answer

    dropped_all, answer = run(scenario())
    assert dropped_all
    assert answer.written == {} and answer.positions == {}
