import numpy as np
import pyarrow as pa

from tabletopic.convert.records import DELETE, UPSERT
from tabletopic.write.upsert_batch import reduce_changes


def _reduce(ids: list[int], ops: list[int], order: list[int] | None = None) -> tuple[list, list]:
    rows = pa.table({"id": ids, "v": [f"r{i}" for i in range(len(ids))]})
    ranks = np.arange(len(ids)) if order is None else np.array(order)
    inserts, keys = reduce_changes(rows, np.array(ops, dtype=np.int8), ranks, ["id"])
    return inserts.to_pylist(), keys.column("id").to_pylist()


def test_the_last_change_of_a_key_wins_and_every_key_touched_is_deleted() -> None:
    inserts, keys = _reduce([1, 2, 1, 3, 3], [UPSERT, UPSERT, UPSERT, UPSERT, DELETE])
    assert inserts == [{"id": 2, "v": "r1"}, {"id": 1, "v": "r2"}]
    assert sorted(keys) == [1, 2, 3]


def test_rank_not_row_position_says_which_change_is_last() -> None:
    inserts, keys = _reduce([7, 7], [UPSERT, UPSERT], order=[1, 0])
    assert inserts == [{"id": 7, "v": "r0"}]
    assert keys == [7]


def test_a_batch_without_a_repeated_key_keeps_its_upserts_and_drops_its_deletes() -> None:
    inserts, keys = _reduce([4, 5, 6], [UPSERT, DELETE, UPSERT])
    assert inserts == [{"id": 4, "v": "r0"}, {"id": 6, "v": "r2"}]
    assert keys == [4, 5, 6]

    inserts, keys = _reduce([4, 5], [UPSERT, UPSERT])
    assert [r["id"] for r in inserts] == [4, 5] and keys == [4, 5]
