"""Table shaping: every catalog call a batch needs, made in threads before its rows are shaped."""

from __future__ import annotations

import threading

import numpy as np
import pyarrow as pa

from tabletopic.buffer.partition_ledger import PartitionLedger
from tabletopic.convert.records import DELETE, SinkRecords
from tabletopic.core.topic_partition import TopicPartition
from tabletopic.write.table_handle import TableError, TableHandle
from tabletopic.write.table_shaper import TableShaper
from tests.unit.fakes import TP0, run

SCHEMA = pa.schema([("id", pa.int64())])


def _rows(tp: TopicPartition, first: int, end: int) -> SinkRecords:
    offsets = np.arange(first, end, dtype=np.int64)
    return SinkRecords(tp[0], tp[1], pa.table({"id": pa.array(offsets)}), offsets, offsets, offsets - first)


class _Opening:
    """Tables that take a while to open: counts how many open at once, and fails the ones named ``bad``."""

    def __init__(self, loaded: set[str], bad: set[str]) -> None:
        self.opened, self.bad = set(loaded), bad
        self.asked: list[tuple[str, pa.Schema | None]] = []
        self.looked_up: list[tuple[str, bool]] = []  # (table, on the event loop's thread)
        self.now = self.most = 0
        self.lock = threading.Lock()
        self.two_at_once = threading.Event()  # no open ends before a second one has begun

    def get(self, name: str, schema: pa.Schema | None = None) -> TableHandle:
        with self.lock:
            self.asked.append((name, schema))
            self.now += 1
            self.most = max(self.most, self.now)
            if self.now == 2:
                self.two_at_once.set()
        try:
            self.two_at_once.wait(10)
            if name in self.bad:
                raise TableError(f"cannot create table {name}")
            self.opened.add(name)
            return TableHandle(name, None, SCHEMA, 0, None)
        finally:
            with self.lock:
                self.now -= 1

    def loaded(self, name: str) -> bool:
        return name in self.opened

    def known(self) -> set[str]:
        return set(self.opened)

    def exists(self, name: str) -> bool:
        self.looked_up.append((name, threading.current_thread() is threading.main_thread()))
        return False


def test_new_tables_open_side_by_side_up_to_the_bound_and_a_failing_one_is_left_to_prepare() -> None:
    """What prepare would open, open takes first: not a loaded table, not one that only deletes keys
    (prepare does not create a table for those), each from its first rows that are not deletes."""
    tables = _Opening(loaded={"db.loaded"}, bad={"db.bad"})
    reads: dict[str, bool] = {}  # table -> read on the event loop's thread

    def read_recorded(table: str) -> dict[TopicPartition, int]:
        reads[table] = threading.current_thread() is threading.main_thread()
        return {TP0: 7} if table == "db.loaded" else {}

    ledger = PartitionLedger(read_recorded)
    shaper = TableShaper(tables, ledger, "c", case_insensitive=False, parallelism=2)  # type: ignore[arg-type]
    deletes = _rows(TP0, 0, 2).with_ops(np.full(2, DELETE, dtype=np.int8))
    wide = pa.table({"id": pa.array([5], pa.int64()), "name": ["x"]})
    upsert = SinkRecords(TP0[0], TP0[1], wide, np.array([5]), np.array([5]), np.array([0]))
    changes = {"db.a": [deletes, upsert], "db.b": [_rows(TP0, 0, 1)], "db.bad": [_rows(TP0, 0, 1)],
               "db.loaded": [_rows(TP0, 0, 1)], "db.only-deletes": [deletes]}
    absent = run(shaper.open(changes))
    assert sorted(name for name, _ in tables.asked) == ["db.a", "db.b", "db.bad"]
    # Deletes alone do not create a table; whether it exists is asked in a thread, and told to prepare.
    assert tables.looked_up == [("db.only-deletes", False)] and absent == {"db.only-deletes"}
    assert shaper.prepare("db.only-deletes", deletes, absent) == ([], [])
    assert len(tables.looked_up) == 1
    assert dict(tables.asked)["db.a"] == wide.schema  # created from its upserts, not its deletes' keys
    assert tables.most == 2
    assert "db.bad" not in tables.opened  # prepare asks again, and turns the error into the records' failures
    # What each opened table records is read in the same threads; buffering them reads nothing more.
    assert reads == {"db.a": False, "db.b": False, "db.loaded": False}
    assert ledger.floors("db.loaded") == {TP0: 7} and ledger.floors("db.a") == {}
    assert not ledger.knows("db.bad") and not ledger.knows("db.only-deletes")
    run(shaper.open(changes))
    assert len(reads) == 3
