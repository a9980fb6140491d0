"""The converter contract: raw Kafka bytes in, Arrow rows out.

A converter sees a whole batch of values (or keys) at once, so it can parse
them with vectorised Arrow code instead of one Python object per field.  A
value it cannot convert is reported as a :class:`Failure` with its position;
the rest of the batch is still converted.  Converters are plugins, found by
their Kafka Connect class name in the ``tabletopic.converters`` entry-point group.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from tabletopic.config.connector_keys import CONVERTER_GROUP
from tabletopic.config.plugin_names import available_plugins
from tabletopic.config.plugin_specs import PluginSpec
from tabletopic.core.record_faults import bisect


@dataclass
class Converted:
    """Rows converted from the input positions in ``indexes`` (ascending), in that order."""

    table: pa.Table
    indexes: np.ndarray
    # Values without a schema (JSON with schemas.enable=false): their types are what the payload held, so
    # a table's column keeps its own type and converts them (no type is promoted for them).
    schemaless: bool = False
    # Each value is one primitive (a string, bytes) in a column named ``value``, not a struct's fields.
    primitive: bool = False


@dataclass(frozen=True)
class Failure:
    index: int
    reason: str


@dataclass
class ConvertResult:
    parts: list[Converted] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    # Values that convert to null, as Connect's converters read JSON ``null``: tombstones, not rows.
    nulls: list[int] = field(default_factory=list)

    @classmethod
    def single(cls, table: pa.Table, indexes: Sequence[int] | np.ndarray) -> ConvertResult:
        return cls([Converted(table, np.asarray(indexes, dtype=np.int64))]) if len(indexes) else cls()

    def positioned(self, positions: Sequence[int], failures: Sequence[Failure] = ()) -> ConvertResult:
        """This result of converting a subset, as positions of the whole (``positions[i]`` for item
        ``i``), with ``failures`` of the items left out of the subset."""
        where = np.asarray(positions, dtype=np.int64)
        out = ConvertResult([Converted(p.table, where[p.indexes], p.schemaless, p.primitive) for p in self.parts],
                            [Failure(int(where[f.index]), f.reason) for f in self.failures] + list(failures),
                            [int(where[i]) for i in self.nulls])
        out.failures.sort(key=lambda f: f.index)
        return out


def guarded(data: Sequence[bytes], rejected: dict[int, str],
            convert: Callable[[Sequence[bytes]], ConvertResult]) -> ConvertResult:
    """``convert`` the items of ``data`` not in ``rejected``; those fail with the reason given."""
    if not rejected:
        return convert(data)
    kept = [i for i in range(len(data)) if i not in rejected]
    result = convert([data[i] for i in kept]) if kept else ConvertResult()
    return result.positioned(kept, [Failure(i, why) for i, why in rejected.items()])


class Converter(Protocol):
    def configure(self, props: Mapping[str, str], is_key: bool) -> None: ...

    def convert(self, topic: str, data: Sequence[bytes]) -> ConvertResult:
        """Convert non-null payloads; ``data`` never holds None (tombstones are handled upstream). Each
        position ends in exactly one of the result's parts, failures or nulls."""
        ...


def load_converter(spec: PluginSpec, is_key: bool) -> Converter:
    entry = available_plugins(CONVERTER_GROUP).get(spec.class_name)
    if entry is None:  # validated earlier; kept for converters removed after validation
        raise ValueError(f"unknown converter {spec.class_name!r}")
    converter: Converter = entry.load()()
    converter.configure(spec.props, is_key)
    return converter


def tabulate_isolating(build: Callable[[list[Any]], pa.Table], items: list[Any], kept: list[int], what: str,
                       result: ConvertResult) -> None:
    """``build(items)`` into ``result``, ``kept`` being each item's input position; if Arrow refuses a
    value, the batch is halved until the item that holds it fails alone (its reason starts with
    ``what``) and the others go on."""
    whole = len(items)
    tables = bisect(whole, lambda lo, hi: (lo, hi, build(items if (lo, hi) == (0, whole) else items[lo:hi])),
                    lambda i, exc: result.failures.append(Failure(kept[i], f"{what}: {exc}")))
    for lo, hi, table in tables:
        result.parts.extend(ConvertResult.single(table, kept[lo:hi]).parts)
