"""Single message transforms, applied in the order of the ``transforms`` key.

A transform works on a whole :class:`SinkRecords` batch of one topic-partition,
so column operations stay vectorised.  It may drop rows (a filter) but must
keep the ``offsets``/``rows`` arrays aligned with the rows it returns.
Transforms are plugins, found by Connect class name in ``tabletopic.transforms``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from tabletopic.config.connector_keys import TRANSFORM_GROUP
from tabletopic.config.plugin_specs import PluginSpec, available_plugins
from tabletopic.convert.records import SinkRecords
from tabletopic.isolation import RECORD_ERRORS


class Transform(Protocol):
    def configure(self, props: Mapping[str, str]) -> None: ...

    def apply(self, records: SinkRecords) -> SinkRecords: ...


class TransformError(Exception):
    """A transform rejected a batch; ``alias`` names which one."""

    def __init__(self, alias: str, cause: Exception) -> None:
        super().__init__(f"transform {alias!r} failed: {cause}")
        self.alias = alias


class TransformRecordError(TransformError, ValueError):
    """A transform raised for a record's content: as a ValueError, isolation.py finds the records that
    raise, and the others go on."""


class TransformChain:
    def __init__(self, specs: Sequence[PluginSpec]) -> None:
        self._steps: list[tuple[str, Transform]] = []
        plugins = available_plugins(TRANSFORM_GROUP)
        for spec in specs:
            transform: Transform = plugins[spec.class_name].load()()
            transform.configure(spec.props)
            self._steps.append((spec.alias, transform))

    def __bool__(self) -> bool:
        return bool(self._steps)

    def apply(self, records: SinkRecords) -> SinkRecords:
        for alias, transform in self._steps:
            try:
                records = transform.apply(records)
            except RECORD_ERRORS as exc:
                raise TransformRecordError(alias, exc) from exc
            except Exception as exc:  # a plugin may raise anything; name it for the operator
                raise TransformError(alias, exc) from exc
            if not len(records):
                break
        return records
