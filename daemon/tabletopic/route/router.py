"""Decide which tables each record goes to, as the Iceberg sink connector does.

* Static, no route field: every record goes to every table in ``iceberg.tables``.
* Static with ``iceberg.tables.route-field``: a record goes to each table whose
  ``iceberg.table.<t>.route-regex`` matches the whole field value; a record that
  matches none is not written (the regexes are a filter).
* Dynamic: the field value, lower-cased, is the table name.  A record whose value
  is null or absent goes nowhere: left out, as the Iceberg sink leaves it
  (``tabletopic.routing.unroutable=skip``), or failed, for ``errors.tolerance``.
* Table Topic mode: the topic names the table (:func:`topic_table`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tabletopic.config.connector import ConnectorConfig
from tabletopic.convert.converter import Failure
from tabletopic.convert.field_path import read_path
from tabletopic.convert.records import SinkRecords


@dataclass
class Routed:
    by_table: dict[str, SinkRecords] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)  # indexes are RawRecords positions
    unrouted: list[int] = field(default_factory=list)  # RawRecords positions left out: no route value


@dataclass(frozen=True)
class RoutingSettings:
    """The connector's routing keys, as the router uses them."""

    tables: tuple[str, ...]  # iceberg.tables
    dynamic: bool  # iceberg.tables.dynamic-enabled
    route_field: str | None  # iceberg.tables.route-field
    case_insensitive: bool  # iceberg.tables.schema-case-insensitive: the route field is found whatever its case
    route_regexes: tuple[tuple[str, re.Pattern[str] | None], ...]  # iceberg.table.<t>.route-regex, per table
    table_topic_namespace: str | None  # Table Topic mode: each topic to its own table in this namespace
    skip_unroutable: bool  # tabletopic.routing.unroutable=skip

    @classmethod
    def of(cls, config: ConnectorConfig) -> RoutingSettings:
        tables = tuple(config.tables or ())
        return cls(tables, config.dynamic_enabled, config.route_field, config.case_insensitive,
                   tuple((t, config.table(t).route_regex) for t in tables), config.table_topic_namespace,
                   config.skip_unroutable)


class Router:
    def __init__(self, settings: RoutingSettings) -> None:
        self._tables = list(settings.tables)
        self._dynamic = settings.dynamic
        self._path = settings.route_field.split(".") if settings.route_field else None
        self._case_insensitive = settings.case_insensitive
        self._regexes = list(settings.route_regexes)
        self._table_topic = settings.table_topic_namespace
        self._skip_unroutable = settings.skip_unroutable

    def route(self, records: SinkRecords, tombstones: bool = False) -> Routed:
        """Route ``records``; tombstones (key-only rows) without the route field go nowhere.

        A tombstone normally follows the delete it completes (Debezium writes the delete, then
        the tombstone), so one that cannot be routed is dropped rather than failed.
        """
        if self._table_topic is not None:
            return Routed({topic_table(self._table_topic, records.topic): records})
        if self._path is None:
            return Routed({t: records for t in self._tables})
        values = self._route_values(records.value)
        if isinstance(values, str):
            return Routed(failures=[Failure(int(r), values) for r in records.rows])
        if values is None:
            if tombstones or not self._dynamic:
                return Routed()
            return self._unroutable(records.rows, f"route field {'.'.join(self._path)!r} is not in the record")
        routed = Routed()
        if self._dynamic:
            missing = np.asarray(values.is_null().to_numpy(zero_copy_only=False), dtype=bool)
            if missing.any() and not tombstones:
                unrouted = self._unroutable(records.rows[missing],
                                            f"route field {'.'.join(self._path)!r} is null; cannot name a table")
                routed.failures, routed.unrouted = unrouted.failures, unrouted.unrouted
            lowered = pc.utf8_lower(values)
            for name in pc.unique(pc.drop_null(lowered)).to_pylist():
                mask = np.asarray(pc.fill_null(pc.equal(lowered, name), False).to_numpy(zero_copy_only=False),
                                  dtype=bool)
                if not _table_name(name):
                    reason = f"route field {'.'.join(self._path)!r} is {name!r}, which is not a table name"
                    routed.failures.extend(Failure(int(r), reason) for r in records.rows[mask])
                    continue
                routed.by_table[name] = records.take(mask)
            return routed
        distinct = pc.unique(pc.drop_null(values)).to_pylist()
        for table, regex in self._regexes:
            if regex is None:
                continue
            hits = [v for v in distinct if regex.fullmatch(v)]
            if not hits:
                continue
            mask = np.asarray(pc.fill_null(pc.is_in(values, pa.array(hits, pa.string())), False)
                              .to_numpy(zero_copy_only=False), dtype=bool)
            routed.by_table[table] = records.take(mask)
        return routed

    def _unroutable(self, rows: np.ndarray, reason: str) -> Routed:
        """Records dynamic routing cannot name a table for: left out, or failed (tabletopic.routing.unroutable)."""
        if self._skip_unroutable:
            return Routed(unrouted=[int(r) for r in rows])
        return Routed(failures=[Failure(int(r), reason) for r in rows])

    def _route_values(self, table: pa.Table) -> pa.Array | str | None:
        """The route values as strings; None if the field is absent; why not, if it holds no scalars."""
        assert self._path is not None
        column = read_path(table, self._path, self._case_insensitive)
        if column is None:
            return None
        if pa.types.is_nested(column.type):
            return f"route field {'.'.join(self._path)!r} is a {column.type}, not a value that names a table"
        return column if column.type == pa.string() else pc.cast(column, pa.string())


def topic_table(namespace: str, topic: str) -> str:
    """Table Topic mode's table for ``topic``: lower-cased, and every character an Iceberg name part
    cannot safely hold (a dot would start a namespace level) made ``_``: ``Events.Orders-v2`` is
    ``<namespace>.events_orders_v2``."""
    return f"{namespace}.{re.sub(r'[^a-z0-9_]', '_', topic.lower())}"


def _table_name(name: str) -> bool:
    """A dotted name whose every part is non-empty: ``""``, ``"ns."`` and ``"a..b"`` name no table."""
    return bool(name) and all(part.strip() for part in name.split("."))
