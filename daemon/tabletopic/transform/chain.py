"""Single message transforms, applied in the order of the ``transforms`` key, each where its predicate says.

A transform works on a whole :class:`SinkRecords` batch of one topic-partition, so column operations
stay vectorised. It may drop rows (a filter), change the value or key, give the records another topic
or headers, or turn some into null values (it then returns several batches). ``offsets`` and ``rows``
stay aligned with the rows it returns: they are the source's, and resume is exact by them.

A transform with ``transforms.<alias>.predicate`` applies only to the records the predicate matches
(with ``negate``, to those it does not); the others pass it unchanged, as Connect's
``TransformationStage`` does. A batch of null values (tombstones) passes a transform that does not
say it takes them (``takes_tombstones``), as Connect's transforms return such a record unchanged.

Transforms and predicates are plugins, found by Connect class name in ``tabletopic.transforms`` and
``tabletopic.predicates``. What they need beyond the value (the converted key, the headers) they say
(``needs_key``, ``needs_headers``), so that staging reads it only for them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from tabletopic.config.connector_keys import PREDICATE_GROUP, TRANSFORM_GROUP
from tabletopic.config.plugin_names import available_plugins
from tabletopic.config.plugin_specs import PluginSpec
from tabletopic.convert.records import SinkRecords
from tabletopic.core.record_faults import RECORD_ERRORS


class Transform(Protocol):
    def configure(self, props: Mapping[str, str]) -> None: ...

    def apply(self, records: SinkRecords) -> SinkRecords | list[SinkRecords]: ...


class Predicate(Protocol):
    def configure(self, props: Mapping[str, str]) -> None: ...

    def test(self, records: SinkRecords) -> np.ndarray:
        """One boolean per record: whether it matches."""
        ...


class TransformError(Exception):
    """A transform rejected a batch; ``alias`` names which one."""

    def __init__(self, alias: str, cause: Exception) -> None:
        super().__init__(f"transform {alias!r} failed: {cause}")
        self.alias = alias


class TransformRecordError(TransformError, ValueError):
    """A transform raised for a record's content: as a ValueError, isolation.py finds the records that
    raise, and the others go on."""


class RowsFailed(ValueError):
    """Raised by a transform that knows which records it cannot take: those of ``mask`` fail, for ``reason``
    (one for them all, or one each, in order), and the transform is applied again to the others, without a
    search for them."""

    def __init__(self, mask: np.ndarray, reason: str | list[str]) -> None:
        super().__init__(reason if isinstance(reason, str) else (reason[0] if reason else ""))
        self.mask = mask
        self.reasons = reason


def every_record(records: SinkRecords, reason: str) -> RowsFailed:
    """The failure of a whole batch, as when what a transform refuses is the batch's shape (its type)."""
    return RowsFailed(np.ones(len(records), dtype=bool), reason)


@dataclass
class Transformed:
    """What the chain made of a batch: the batches that go on, and the records that failed, by row."""

    batches: list[SinkRecords] = field(default_factory=list)
    failures: list[tuple[int, str]] = field(default_factory=list)


class _Step:
    def __init__(self, alias: str, transform: Transform, predicate: Predicate | None, negate: bool) -> None:
        self.alias = alias
        self.transform = transform
        self.predicate = predicate
        self.negate = negate
        self.takes_tombstones = bool(getattr(transform, "takes_tombstones", False))

    def run(self, records: SinkRecords, out: Transformed) -> list[SinkRecords]:
        if records.tombstone and not self.takes_tombstones:
            return [records]
        if self.predicate is None:
            return self._apply(records, out)
        try:
            matches = np.asarray(self.predicate.test(records), dtype=bool) ^ self.negate
        except RECORD_ERRORS as exc:
            raise TransformRecordError(self.alias, exc) from exc
        if matches.all():
            return self._apply(records, out)
        if not matches.any():
            return [records]
        return [*self._apply(records.take(matches), out), records.take(~matches)]

    def _apply(self, records: SinkRecords, out: Transformed) -> list[SinkRecords]:
        try:
            result = self.transform.apply(records)
        except RowsFailed as exc:
            mask = np.asarray(exc.mask, dtype=bool)
            if not mask.any():  # a transform that names no record would loop
                raise TransformError(self.alias, exc) from exc
            rows = records.rows[mask]
            reasons = [exc.reasons] * len(rows) if isinstance(exc.reasons, str) else exc.reasons
            out.failures.extend((int(r), f"transform {self.alias!r}: {why}")
                                for r, why in zip(rows, reasons, strict=True))
            return self._apply(records.take(~mask), out) if not mask.all() else []
        except RECORD_ERRORS as exc:
            raise TransformRecordError(self.alias, exc) from exc
        except Exception as exc:  # a plugin may raise anything; name it for the operator
            raise TransformError(self.alias, exc) from exc
        return result if isinstance(result, list) else [result]


class TransformChain:
    def __init__(self, specs: Sequence[PluginSpec], predicates: Sequence[PluginSpec] = ()) -> None:
        transforms, tests = available_plugins(TRANSFORM_GROUP), available_plugins(PREDICATE_GROUP)
        loaded: dict[str, Predicate] = {}
        for spec in predicates:
            predicate: Predicate = tests[spec.class_name].load()()
            predicate.configure(spec.props)
            loaded[spec.alias] = predicate
        self._steps: list[_Step] = []
        for spec in specs:
            transform: Transform = transforms[spec.class_name].load()()
            transform.configure(spec.props)
            self._steps.append(_Step(spec.alias, transform, loaded.get(spec.predicate or ""), spec.negate))
        parts = [s.transform for s in self._steps] + [s.predicate for s in self._steps if s.predicate is not None]
        self.needs_key = any(getattr(p, "needs_key", False) for p in parts)
        self.needs_headers = any(getattr(p, "needs_headers", False) for p in parts)
        self.takes_tombstones = any(s.takes_tombstones for s in self._steps)

    def __bool__(self) -> bool:
        return bool(self._steps)

    def apply(self, records: SinkRecords) -> Transformed:
        out = Transformed()
        batches = [records]
        for step in self._steps:
            batches = [done for batch in batches for done in step.run(batch, out) if len(done)]
            if not batches:
                break
        out.batches = batches
        return out
