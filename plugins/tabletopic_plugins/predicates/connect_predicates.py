"""Connect's predicates, for ``transforms.<alias>.predicate``: each answers, per record, whether it matches.

* TopicNameMatches: the record's topic (as the transforms before left it) matches ``pattern``, a Java
  regular expression, in whole.
* HasHeaderKey: the record has at least one header named ``name``.
* RecordIsTombstone: the record's value is null.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from tabletopic.convert.records import SinkRecords
from tabletopic_plugins.java_regex import compile_java


class TopicNameMatches:
    keys = frozenset(("pattern",))

    def configure(self, props: Mapping[str, str]) -> None:
        pattern = props.get("pattern")
        if pattern is None:
            raise ValueError('Missing required configuration "pattern" which has no default value.')
        if not pattern:
            raise ValueError("Invalid value  for configuration pattern: String must be non-empty")
        try:
            self.pattern = compile_java(pattern)
        except ValueError as exc:
            raise ValueError(f"Invalid value {pattern} for configuration pattern: entry must be a Java-compatible "
                             f"regular expression: {exc}") from None

    def test(self, records: SinkRecords) -> np.ndarray:
        return np.full(len(records), self.pattern.fullmatch(records.record_topic) is not None, dtype=bool)


class HasHeaderKey:
    keys = frozenset(("name",))
    needs_headers = True

    def configure(self, props: Mapping[str, str]) -> None:
        name = props.get("name")
        if name is None:
            raise ValueError('Missing required configuration "name" which has no default value.')
        if not name:
            raise ValueError("Invalid value  for configuration name: String must be non-empty")
        self.name = name

    def test(self, records: SinkRecords) -> np.ndarray:
        if records.headers is None:
            return np.zeros(len(records), dtype=bool)
        return np.fromiter((any(h[0] == self.name for h in row) for row in records.headers), dtype=bool,
                           count=len(records))


class RecordIsTombstone:
    keys: frozenset[str] = frozenset()

    def configure(self, props: Mapping[str, str]) -> None:
        pass

    def test(self, records: SinkRecords) -> np.ndarray:
        return np.full(len(records), records.tombstone, dtype=bool)
