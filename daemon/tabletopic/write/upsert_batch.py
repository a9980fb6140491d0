"""Reduce one round's changes to a keyed table into what the snapshot must hold.

The last change per key wins (rows arrive in offset order within a partition).  Every key
touched goes into the equality-delete file, so the row it had before this snapshot goes;
the keys whose last change is an upsert get their new row in the data file.  Deletes of a
key that does not exist are harmless, and an insert followed by a delete leaves nothing.
Nothing here reads the table: the cost grows with the batch, not with the table.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from tabletopic.convert.records import UPSERT

_SEQ = "__tabletopic_seq"


def reduce_changes(rows: pa.Table, ops: np.ndarray, order: np.ndarray,
                   id_columns: list[str]) -> tuple[pa.Table, pa.Table]:
    """Return (rows to insert, keys to delete); ``order`` ranks the rows in offset order."""
    if not rows.num_rows:
        return rows, rows.select(id_columns)
    keys = rows.select(id_columns).append_column(_SEQ, pa.array(order, pa.int64()))
    last = keys.group_by(id_columns, use_threads=False).aggregate([(_SEQ, "max")])
    if last.num_rows == rows.num_rows:
        # No key twice, as in most batches: every row is its key's last change, and nothing is taken.
        upserts = ops == UPSERT
        return (rows if upserts.all() else rows.filter(pa.array(upserts))), rows.select(id_columns)
    by_rank = np.empty(len(order), dtype=np.int64)
    by_rank[order] = np.arange(len(order))
    winners = np.sort(by_rank[last.column(f"{_SEQ}_max").to_numpy()])
    delete_keys = rows.select(id_columns).take(pa.array(winners))
    inserts = rows.take(pa.array(winners[ops[winners] == UPSERT]))
    return inserts, delete_keys
