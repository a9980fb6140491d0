"""One fetch's records staged for the tables: convert → transform → route → which change each is.

Pure: no table, no JVM, no broker. What comes out is, for each table, the rows to
conform to it (``SinkTask`` shapes them to the table and buffers them) and, for every
record that could not be staged, a :class:`RecordFailure` for ``errors.tolerance``.
Every record ends in exactly one of the two, or is left out by a documented rule
(a tombstone for an append table, a record no ``route-regex`` matches, one dynamic
routing cannot place: ``unrouted``); the fuzz tests hold it to that.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import cast

import numpy as np

from tabletopic.config.connector import ConnectorConfig, TableConfig
from tabletopic.config.plugin_specs import PluginSpec
from tabletopic.convert.change_kind import ChangeKinds
from tabletopic.convert.converter import Converter, ConvertResult, load_converter
from tabletopic.convert.isolation import apply_isolating, convert_isolating
from tabletopic.convert.key_rows import as_deletes, tombstone_deletes
from tabletopic.convert.records import RawRecords, SinkRecords, no_columns
from tabletopic.route.router import Router, RoutingSettings
from tabletopic.stage.failed_records import RecordFailure
from tabletopic.transform.chain import TransformChain, TransformError


@dataclass
class Staged:
    failures: list[RecordFailure] = field(default_factory=list)
    changes: dict[str, list[SinkRecords]] = field(default_factory=dict)  # by table, in routing order
    tombstones: list[int] = field(default_factory=list)  # null values, or values that convert to null
    unrouted: list[int] = field(default_factory=list)  # left out: dynamic routing found no route value


def payload_sizes(payloads: list[bytes | None]) -> np.ndarray:
    nulls = payloads.count(None)
    if not nulls:  # the usual batch: lengths taken without a Python step per payload
        return np.fromiter(map(len, payloads), dtype=np.int64, count=len(payloads))  # type: ignore[arg-type]  # no None here: numpy's stub wants a typed iterable
    if nulls == len(payloads):  # keys, most often
        return np.zeros(len(payloads), dtype=np.int64)
    return np.fromiter((len(p) if p is not None else 0 for p in payloads), dtype=np.int64, count=len(payloads))


@dataclass(frozen=True)
class StagingSettings:
    """The connector's keys that staging reads."""

    key_converter: PluginSpec  # key.converter and its key.converter.* keys
    value_converter: PluginSpec  # value.converter and its value.converter.* keys
    transforms: tuple[PluginSpec, ...]  # transforms, in order
    predicates: tuple[PluginSpec, ...]  # predicates
    routing: RoutingSettings
    may_key: bool  # some table may be keyed (upsert, cdc-field, or a table's own keys): tombstones become deletes
    max_value_bytes: int  # tabletopic.input.max-value-bytes
    case_insensitive: bool  # iceberg.tables.schema-case-insensitive: a change field is found whatever its case
    # iceberg.table.<t>.*: whether a table is keyed, and by which change field. Not in the repr: a bound
    # method's repr is its whole config's.
    table: Callable[[str], TableConfig] = field(repr=False)

    @classmethod
    def of(cls, config: ConnectorConfig) -> StagingSettings:
        return cls(config.key_converter, config.value_converter, tuple(config.transforms),
                   tuple(config.predicates), RoutingSettings.of(config), config.may_key, config.max_value_bytes,
                   config.case_insensitive, config.table)


class Staging:
    def __init__(self, settings: StagingSettings) -> None:
        self._settings = settings
        self.value_converter: Converter = load_converter(settings.value_converter, is_key=False)
        self.key_converter: Converter = load_converter(settings.key_converter, is_key=True)
        self.transforms = TransformChain(settings.transforms, settings.predicates)
        self.router = Router(settings.routing)
        self._change_kinds: dict[str | None, ChangeKinds] = {}  # by cdc field: keyed tables may differ in it

    def stage(self, raw: RawRecords, value_sizes: np.ndarray | None = None,
              key_sizes: np.ndarray | None = None) -> Staged:
        """Stage ``raw``; a stage that raises for one record's sake fails that record alone (see
        isolation.py). The sizes, if the caller has them, save measuring the payloads again."""
        staged = Staged(failures=self._too_large(payload_sizes(raw.values) if value_sizes is None else value_sizes,
                                                 payload_sizes(raw.keys) if key_sizes is None else key_sizes))
        failures = staged.failures

        def failed(stage: str) -> Callable[[int, str], None]:
            return lambda row, why: failures.append(RecordFailure(stage, row, why))

        for converted in self._convert(raw, failures, staged.tombstones):
            pieces = [converted]
            if self.transforms:
                try:
                    pieces = []
                    for done in apply_isolating(self.transforms.apply, converted, failed("transform")):
                        failures.extend(RecordFailure("transform", row, why) for row, why in done.failures)
                        pieces.extend(done.batches)
                except TransformError as exc:
                    failures.extend(RecordFailure("transform", int(r), str(exc)) for r in converted.rows)
                    continue
            keyed = []
            for records in pieces:
                if records.tombstone and records.key is None and self._settings.may_key and len(records):
                    # A transform made these null (ExtractNewRecordState's deletes): their keys delete.
                    keyed.extend(self._with_keys(records, raw, failures))
                else:
                    keyed.append(records)
            for records in keyed:
                if not len(records):
                    continue
                if records.tombstone:
                    if not self._settings.may_key:
                        continue  # a null value carries nothing for an append table
                    deletes = as_deletes(records)
                    if isinstance(deletes, str):
                        failures.extend(RecordFailure("transform", int(r), deletes) for r in records.rows)
                        continue
                    records = deletes
                route = functools.partial(self.router.route, tombstones=records.tombstone)
                for routed in apply_isolating(route, records, failed("route")):
                    failures.extend(RecordFailure("route", f.index, f.reason) for f in routed.failures)
                    staged.unrouted.extend(routed.unrouted)
                    for table, subset in routed.by_table.items():
                        staged.changes.setdefault(table, []).extend(self._changes(table, subset, failures))
        return staged

    def _too_large(self, value_sizes: np.ndarray, key_sizes: np.ndarray) -> list[RecordFailure]:
        """Records whose key or value no converter may see: over tabletopic.input.max-value-bytes."""
        limit = self._settings.max_value_bytes
        return [RecordFailure("convert", int(i), f"{what} of {int(sizes[i]):,} bytes is over "
                              f"tabletopic.input.max-value-bytes ({limit:,}); it was not parsed")
                for what, sizes in (("value", value_sizes), ("key", key_sizes))
                for i in np.flatnonzero(sizes > limit)]

    def _convert(self, raw: RawRecords, failures: list[RecordFailure], tombstones: list[int]) -> list[SinkRecords]:
        """Converted rows, and tombstones (null values) as batches of their keys; records already in
        ``failures`` are not converted. The positions of the tombstones (null values, and values the
        converter reads as null) go into ``tombstones``. Each batch carries its keys and headers where a
        transform needs them."""
        refused = {f.index for f in failures}
        present: list[int] | range
        if not refused and None not in raw.values:  # the usual batch, passed on as it is
            present, values = range(len(raw.values)), raw.values
        else:
            present = []
            for i, value in enumerate(raw.values):
                if i not in refused:
                    (present if value is not None else tombstones).append(i)
            values = [raw.values[i] for i in present]
        out: list[SinkRecords] = []
        if present:
            # cast: ``present`` holds no null value, whichever way it was made
            result = convert_isolating(lambda batch: self.value_converter.convert(raw.topic, batch),
                                       cast("list[bytes]", values))
            failures.extend(RecordFailure("convert", present[f.index], f.reason) for f in result.failures)
            tombstones += [present[i] for i in result.nulls]
            position = np.asarray(present, dtype=np.int64)
            offsets = np.asarray(raw.offsets, dtype=np.int64)
            stamps = np.asarray(raw.timestamps, dtype=np.int64)
            for part in result.parts:
                rows = position[part.indexes]
                records = SinkRecords(raw.topic, raw.partition, part.table, offsets[rows], stamps[rows], rows,
                                      schemaless=part.schemaless, primitive=part.primitive)
                out.extend(self._with_keys(records, raw, failures) if self.transforms.needs_key else [records])
        absent = sorted(tombstones) if self._settings.may_key else []
        if absent:
            # After the values: they may create the table these deletes apply to. The buffer
            # orders rows by offset again before the last change per key is chosen.
            deletes, key_failures = tombstone_deletes(raw, absent, lambda keys: convert_isolating(
                lambda some: self.key_converter.convert(raw.topic, some), keys))
            failures.extend(RecordFailure("convert", f.index, f.reason) for f in key_failures)
            out.extend(deletes)
        if self.transforms.needs_headers:
            out = [replace(r, headers=[list(raw.headers[int(i)]) for i in r.rows]) for r in out]
        return out

    def _with_keys(self, records: SinkRecords, raw: RawRecords, failures: list[RecordFailure]) -> list[SinkRecords]:
        """``records`` with their keys converted, as transforms on keys need them: a batch per key shape, and
        one for the null keys (a key table of no columns)."""
        keys = [raw.keys[int(r)] for r in records.rows]
        given = np.asarray([i for i, k in enumerate(keys) if k is not None], dtype=np.int64)
        result = ConvertResult()
        if len(given):
            result = convert_isolating(lambda some: self.key_converter.convert(raw.topic, some),
                                       [k for k in keys if k is not None])  # the keys at ``given``
        failures.extend(RecordFailure("convert", int(records.rows[given[f.index]]), f"key: {f.reason}")
                        for f in result.failures)
        out = []
        null = np.ones(len(records), dtype=bool)
        null[given] = False
        null[given[result.nulls]] = True
        for part in result.parts:
            mask = np.zeros(len(records), dtype=bool)
            mask[given[part.indexes]] = True
            out.append(records.take(mask).with_key(part.table, part.primitive))
        if null.any():
            out.append(records.take(null).with_key(no_columns(int(null.sum()))))
        return out

    def _changes(self, table: str, records: SinkRecords, failures: list[RecordFailure]) -> list[SinkRecords]:
        """What ``records`` change in ``table``: appended rows, or, when the table is keyed (its own
        upsert and cdc-field keys, or the connector's), upserts and deletes by its id columns."""
        settings = self._settings.table(table)
        if records.tombstone:
            # A tombstone deletes its key from a keyed table; in an append table it carries nothing.
            return [records] if settings.keyed else []
        if not settings.keyed:
            return [records]
        kinds = self._change_kinds.get(settings.cdc_field)
        if kinds is None:
            kinds = self._change_kinds[settings.cdc_field] = ChangeKinds(settings.cdc_field,
                                                                         self._settings.case_insensitive)
        classified = apply_isolating(kinds.classify, records,
                                     lambda row, why: failures.append(RecordFailure("transform", row, why)))
        failures.extend(RecordFailure("transform", f.index, f.reason) for _, fs in classified for f in fs)
        return [kept for kept, _ in classified if len(kept)]
