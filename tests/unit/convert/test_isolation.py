"""A stage that raises for one record's sake fails that record alone; anything else still raises."""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pytest

from tabletopic.convert.converter import ConvertResult
from tabletopic.convert.isolation import apply_isolating, convert_isolating
from tabletopic.convert.records import SinkRecords


def _parse_all(data: Sequence[bytes]) -> ConvertResult:
    """A converter that raises for the whole batch if any value is bad (as a vectorised one may)."""
    rows = [json.loads(v) for v in data]
    return ConvertResult.single(pa.Table.from_pylist(rows), list(range(len(rows))))


def test_a_converter_that_raises_fails_only_the_bad_values() -> None:
    data = [b'{"a": 1}', b"not json", b'{"a": 3}', b'{"a": 4}', b"{", b'{"a": 6}']
    result = convert_isolating(_parse_all, data)
    assert sorted(f.index for f in result.failures) == [1, 4]
    assert all(f.reason.startswith("JSONDecodeError") for f in result.failures)
    kept = sorted(int(i) for p in result.parts for i in p.indexes)
    assert kept == [0, 2, 3, 5]
    values = {int(i): v for p in result.parts for i, v in zip(p.indexes, p.table.column("a").to_pylist(), strict=True)}
    assert values == {0: 1, 2: 3, 3: 4, 5: 6}


def test_a_system_failure_is_not_isolated() -> None:
    def unreachable(data: Sequence[bytes]) -> ConvertResult:
        raise ConnectionError("registry down")

    with pytest.raises(ConnectionError):
        convert_isolating(unreachable, [b"x", b"y"])


def test_apply_isolating_keeps_the_others_in_order() -> None:
    n = 9
    records = SinkRecords("t", 0, pa.table({"v": list(range(n))}), np.arange(100, 100 + n), np.zeros(n, np.int64),
                          np.arange(n))

    def no_sevens(r: SinkRecords) -> list[int]:
        values = r.value.column("v").to_pylist()
        if 7 in values:
            raise ValueError("seven")
        return values

    failed: list[tuple[int, str]] = []
    out = apply_isolating(no_sevens, records, lambda row, why: failed.append((row, why)))
    assert failed == [(7, "ValueError: seven")]
    assert [v for part in out for v in part] == [0, 1, 2, 3, 4, 5, 6, 8]
