"""A connector's buffers: the sums over them, kept by each change, say what summing every buffer says."""

from __future__ import annotations

from tabletopic.buffer.table_buffers import TableBuffers
from tests.unit.buffer.test_table_buffer import part


def _sums(buffers: TableBuffers) -> tuple[int, int]:
    return sum(b.records for b in buffers), sum(b.nbytes for b in buffers)


def test_the_sums_follow_every_way_rows_come_and_go() -> None:
    buffers = TableBuffers()
    buffers.add("db.a", [part(0, [0, 1, 2], [1, 2, 3]), part(1, [0, 1], [1, 2])], {})
    buffers.add("db.b", [part(0, [5, 6], [1, 2])], {("t", 0): 6})  # offset 5 is in db.b already
    assert (buffers.records, buffers.bytes) == _sums(buffers) and buffers.records == 6
    steps = [
        lambda: buffers.drop_below([("db.a", ("t", 0), 2)], "in a test"),
        lambda: buffers.discard({("t", 1)}),
        lambda: buffers.drain("db.b", {}),
        lambda: buffers.add("db.b", [part(0, [7], [3])], {}),
        lambda: buffers.drain_all({"db.a": {}, "db.b": {}}),
    ]
    records = [4, 2, 1, 2, 0]
    for step, expected in zip(steps, records, strict=True):
        step()
        assert (buffers.records, buffers.bytes) == _sums(buffers) and buffers.records == expected
    buffers.add("db.a", [part(0, [9], [4])], {})
    buffers.clear()
    assert (buffers.records, buffers.bytes, buffers.names()) == (0, 0, [])


def test_a_drain_cuts_each_table_at_its_own_floors_and_skips_empty_buffers() -> None:
    buffers = TableBuffers()
    buffers.add("db.a", [part(0, [0, 1], [1, 2])], {})
    buffers.add("db.b", [part(0, [0], [1])], {})
    buffers.drain("db.b", {})
    drained = buffers.drain_all({"db.a": {("t", 0): 0}, "db.b": {}})
    assert [(d.table, d.records, d.floors) for d in drained] == [("db.a", 2, {("t", 0): 0})]
    assert buffers.drain("db.missing", {}) is None
