"""``org.apache.kafka.connect.transforms.Filter``: drops every record it is applied to, tombstones included.

Meant with a predicate (``transforms.<alias>.predicate``), as in Connect: it then drops the records the
predicate matches (or, with ``negate=true``, those it does not).
"""

from __future__ import annotations

from collections.abc import Mapping

from tabletopic.convert.records import SinkRecords


class Filter:
    keys: frozenset[str] = frozenset()
    takes_tombstones = True

    def configure(self, props: Mapping[str, str]) -> None:
        pass

    def apply(self, records: SinkRecords) -> list[SinkRecords]:
        return []
