"""HeaderFrom$Key and $Value, DropHeaders and InsertHeader, with Connect's tests' cases as facts."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tabletopic.config.connector_keys import TRANSFORM_GROUP
from tabletopic.config.plugin_names import available_plugins
from tests.unit.plugins.transforms.smt import batch, failed, run, tombstones, values

FROM = "org.apache.kafka.connect.transforms.HeaderFrom$Value"


@pytest.mark.parametrize(("operation", "left"), [("copy", {"field1": "a", "field2": 1}), ("move", {"field2": 1})])
def test_header_from_copies_or_moves(operation: str, left: dict[str, object]) -> None:
    out = run(FROM, {"fields": "field1", "headers": "inserted1", "operation": operation},
              batch([{"field1": "a", "field2": 1}], headers=[[("existing", b"x")]]))
    assert values(out) == [left]
    assert out.batches[0].headers == [[("existing", b"x"), ("inserted1", "a")]]


def test_header_from_settings_and_failures() -> None:
    plugin = available_plugins(TRANSFORM_GROUP)[FROM].load()
    with pytest.raises(ValueError, match="same number of elements"):
        plugin().configure({"fields": "a,b", "headers": "h", "operation": "copy"})
    with pytest.raises(ValueError, match="String must be one of"):
        plugin().configure({"fields": "a", "headers": "h", "operation": "swap"})
    assert list(failed(run(FROM, {"fields": "x", "headers": "h", "operation": "copy"}, batch([{"a": 1}])))) == [0]
    assert list(failed(run(FROM, {"fields": "x", "headers": "h", "operation": "copy"}, tombstones(1)))) == [0]
    out = run(FROM, {"fields": "x", "headers": "h", "operation": "copy"}, batch([{"a": 1}], schemaless=True))
    assert out.batches[0].headers == [[("h", None)]]


def test_header_from_key() -> None:
    out = run("org.apache.kafka.connect.transforms.HeaderFrom$Key", {"fields": "id", "headers": "h",
                                                                    "operation": "copy"},
              batch([{"a": 1}], key=pa.table({"id": [5]})))
    assert out.batches[0].headers == [[("h", 5)]]


def test_drop_and_insert_headers() -> None:
    out = run("DropHeaders", {"headers": "a,b"}, batch([{"v": 1}], headers=[[("a", b"1"), ("c", b"2"), ("b", b"3")]]))
    assert out.batches[0].headers == [[("c", b"2")]]
    out = run("InsertHeader", {"header": "h", "value.literal": "v"}, tombstones(1))
    assert out.batches[0].headers == [[("h", "v")]] and values(out) == [None]
    with pytest.raises(ValueError, match="Missing required configuration"):
        available_plugins(TRANSFORM_GROUP)["org.apache.kafka.connect.transforms.InsertHeader"].load()().configure(
            {"header": "h"})
