"""Batches of records as a transform sees them, and a chain built from Connect-style settings, for the SMT tests."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from tabletopic.config.connector_keys import PREDICATE_GROUP, TRANSFORM_GROUP
from tabletopic.config.plugin_names import resolve
from tabletopic.config.plugin_specs import PluginSpec
from tabletopic.convert.records import DELETE, Headers, SinkRecords, no_columns
from tabletopic.transform.chain import TransformChain, Transformed


def batch(value: pa.Table | dict[str, Any] | list[dict[str, Any]], *, schema: pa.Schema | None = None,
          schemaless: bool = False, primitive: bool = False, key: pa.Table | None = None, key_primitive: bool = False,
          topic: str = "orders", partition: int = 0, timestamps: list[int] | None = None,
          headers: list[Headers] | None = None, first_offset: int = 100) -> SinkRecords:
    """Records whose values are ``value``: a table, columns by name, or rows."""
    if isinstance(value, list):
        table = pa.Table.from_pylist(value, schema=schema)
    elif isinstance(value, dict):
        table = pa.table(value) if schema is None else pa.table(value, schema=schema)
    else:
        table = value
    n = table.num_rows
    return SinkRecords(topic, partition, table, np.arange(first_offset, first_offset + n, dtype=np.int64),
                       np.asarray(timestamps if timestamps is not None else [1_700_000_000_000] * n, dtype=np.int64),
                       np.arange(n, dtype=np.int64), schemaless=schemaless, primitive=primitive, key=key,
                       key_primitive=key_primitive, headers=headers)


def primitive(values: list[Any], arrow: pa.DataType | None = None, **kw: Any) -> SinkRecords:
    return batch(pa.table({"value": pa.array(values, arrow)}), primitive=True, **kw)


def tombstones(n: int, key: pa.Table | None = None, **kw: Any) -> SinkRecords:
    records = batch(no_columns(n), key=key, **kw)
    records.tombstone = True
    records.ops = np.full(n, DELETE, dtype=np.int8)
    return records


def spec(type_name: str, props: dict[str, str] | None = None, *, alias: str = "t", predicate: str | None = None,
         negate: bool = False, group: str = TRANSFORM_GROUP) -> PluginSpec:
    class_name = resolve(group, type_name)
    assert class_name is not None, f"no plugin named {type_name}"
    return PluginSpec(class_name, dict(props or {}), alias, predicate, negate)


def chain(*steps: PluginSpec, predicates: tuple[PluginSpec, ...] = ()) -> TransformChain:
    return TransformChain(list(steps), list(predicates))


def run(type_name: str, props: dict[str, str] | None, records: SinkRecords) -> Transformed:
    return chain(spec(type_name, props)).apply(records)


def predicate(type_name: str, props: dict[str, str] | None = None, alias: str = "p") -> PluginSpec:
    return spec(type_name, props, alias=alias, group=PREDICATE_GROUP)


def values(out: Transformed) -> list[dict[str, Any] | Any | None]:
    """Each record's value after the chain, in offset order: a dict of fields, a primitive, or None (null)."""
    found: list[tuple[int, Any]] = []
    for part in out.batches:
        rows = [None] * len(part) if part.tombstone else \
            part.value.column(0).to_pylist() if part.primitive else part.value.to_pylist()
        found += zip(part.offsets.tolist(), rows, strict=True)
    return [v for _, v in sorted(found, key=lambda item: item[0])]


def keys(out: Transformed) -> list[Any]:
    found: list[tuple[int, Any]] = []
    for part in out.batches:
        if part.key is None or not part.key.num_columns:
            rows: list[Any] = [None] * len(part)
        else:
            rows = part.key.column(0).to_pylist() if part.key_primitive else part.key.to_pylist()
        found += zip(part.offsets.tolist(), rows, strict=True)
    return [v for _, v in sorted(found, key=lambda item: item[0])]


def topics(out: Transformed) -> list[str]:
    found = [(o, part.record_topic) for part in out.batches for o in part.offsets.tolist()]
    return [t for _, t in sorted(found)]


def failed(out: Transformed) -> dict[int, str]:
    """Failed records by their position in the input batch."""
    return dict(out.failures)
