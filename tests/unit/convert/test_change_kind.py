"""Which change a record is: the cdc field's value, and a clear failure when it cannot say."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from tabletopic.convert.change_kind import ChangeKinds
from tabletopic.convert.records import DELETE, UPSERT, SinkRecords


def _records(value: pa.Table) -> SinkRecords:
    n = value.num_rows
    return SinkRecords("t", 0, value, np.arange(n, dtype=np.int64), np.zeros(n, dtype=np.int64),
                       np.arange(n, dtype=np.int64))


def test_the_cdc_field_decides_and_unknown_values_fail_alone() -> None:
    kept, failures = ChangeKinds("op", False).classify(_records(pa.table({"id": [1, 2, 3], "op": ["I", "d", "X"]})))
    assert list(kept.ops) == [UPSERT, DELETE] and [f.index for f in failures] == [2]
    assert "got 'X'" in failures[0].reason


def test_a_struct_cdc_field_fails_each_record_with_what_to_fix() -> None:
    value = pa.table({"id": [1, 2], "op": pa.array([{"kind": "I"}, {"kind": "D"}])})
    kept, failures = ChangeKinds("op", False).classify(_records(value))
    assert len(kept) == 0 and [f.index for f in failures] == [0, 1]
    assert "must be a string" in failures[0].reason and "struct" in failures[0].reason
    # A nested path reaches the string inside it.
    kept, failures = ChangeKinds("op.kind", False).classify(_records(value))
    assert list(kept.ops) == [UPSERT, DELETE] and failures == []
