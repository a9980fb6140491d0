"""Avro schema resolution, as the compatibility levels of a Schema Registry use it.

``read_problems(reader, writer)`` lists why data written with ``writer`` cannot
be read with ``reader`` under the Avro specification's resolution rules
(promotions, record fields matched by name or alias with defaults for missing
ones, enum symbols, unions branch by branch).  An empty list means compatible.
Logical types are annotations on their underlying types and do not change the
outcome, as in Avro's own ``SchemaCompatibility``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tabletopic.registry.avro_schema import PRIMITIVES, AvroSchema, deref, kind_of, short_name
from tabletopic.registry.compatibility_levels import pairs

_PROMOTIONS = {
    "int": {"long", "float", "double"},
    "long": {"float", "double"},
    "float": {"double"},
    "string": {"bytes"},
    "bytes": {"string"},
}


def read_problems(reader: AvroSchema, writer: AvroSchema) -> list[str]:
    return list(_Checker(reader, writer).check(reader.root, None, writer.root, None, "$"))


class _Checker:
    def __init__(self, reader: AvroSchema, writer: AvroSchema) -> None:
        self.reader, self.writer = reader, writer
        self.assumed: set[tuple[int, int]] = set()  # recursive types: a pair under check is assumed to match

    def check(self, r: Any, r_ns: str | None, w: Any, w_ns: str | None, path: str) -> Iterator[str]:
        r, r_ns = deref(r, r_ns, self.reader)
        w, w_ns = deref(w, w_ns, self.writer)
        rk, wk = kind_of(r), kind_of(w)
        if wk == "union":
            for i, branch in enumerate(w):
                yield from self.check(r, r_ns, branch, w_ns, f"{path}[{i}]")
            return
        if rk == "union":
            for branch in r:
                if not list(self.check(branch, r_ns, w, w_ns, path)):
                    return
            yield f"{path}: the reader's union has no branch for the writer's {wk}"
            return
        if rk != wk:
            if wk in _PROMOTIONS and rk in _PROMOTIONS[wk]:
                return
            yield f"{path}: the writer's {wk} cannot be read as {rk}"
            return
        if rk in PRIMITIVES:
            return
        if rk in ("record", "enum", "fixed") and not self._same_name(r, w):
            yield f"{path}: the writer's {wk} {short_name(w)} is not the reader's {short_name(r)}"
            return
        if rk == "array":
            yield from self.check(r["items"], r_ns, w["items"], w_ns, f"{path}[]")
        elif rk == "map":
            yield from self.check(r["values"], r_ns, w["values"], w_ns, f"{path}{{}}")
        elif rk == "fixed":
            if r["size"] != w["size"]:
                yield f"{path}: fixed {short_name(r)} has size {r['size']}, the writer's {w['size']}"
        elif rk == "enum":
            missing = [s for s in w["symbols"] if s not in r["symbols"]]
            if missing and "default" not in r:
                yield f"{path}: enum {short_name(r)} lacks the writer's symbols {missing} and has no default"
        elif rk == "record":
            pair = (id(r), id(w))
            if pair in self.assumed:
                return
            self.assumed.add(pair)
            written = {f["name"]: f for f in w["fields"]}
            for f in r["fields"]:
                source = next((written[n] for n in [f["name"], *f.get("aliases", [])] if n in written), None)
                if source is None:
                    if "default" not in f:
                        yield f"{path}.{f['name']}: a new field without a default"
                    continue
                yield from self.check(f["type"], r_ns, source["type"], w_ns, f"{path}.{f['name']}")

    @staticmethod
    def _same_name(r: dict[str, Any], w: dict[str, Any]) -> bool:
        short = short_name(w)
        return short == short_name(r) or short in [a.rpartition(".")[2] for a in r.get("aliases", [])]


def compatibility_problems(level: str, new: AvroSchema, previous: list[AvroSchema]) -> list[str]:
    """Why ``new`` may not follow ``previous`` (oldest first, live versions only) under ``level``."""
    problems: list[str] = []
    for original, update, backward in pairs(level, new, previous):
        # The update must read what the original wrote.
        said = "new schema cannot read old data" if backward else "old schema cannot read new data"
        problems += [f"{said}: {p}" for p in read_problems(update, original)]
    return problems
