"""Commits that Iceberg refuses the same way round after round: the connector fails, naming the cause.

A catalog or storage outage is retried for as long as it lasts. A refusal by Iceberg itself is not an
outage: a v3 table's "Must use DVs for position deletes", a table property its writer cannot honour, a
second writer that keeps committing under this one. It fails the same way every round, and retrying it
forever would leave the connector RUNNING while its tables stand still. So after
``tabletopic.commit.max-consecutive-refusals`` rounds in a row in which a table's commit was
refused for one cause, the coordinator stops and the connector is FAILED with that cause.

A conflict (Iceberg's CommitFailedException, once Iceberg's own retries are spent) is tried again the next
round, as the released Iceberg sinks do; with ``iceberg.control.commit.max-consecutive-failures`` set, that
many rounds of conflicts in a row for a table fail the connector, as the Iceberg sink's main branch does.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from tabletopic.write.java_errors import JavaErrorKind
from tabletopic.write.table_committer import CommitFailed, CommitFenced

# How Iceberg refuses a commit; a catalog or storage outage is of another kind.
_REFUSALS = (JavaErrorKind.REFUSED, JavaErrorKind.VALIDATION)
# What differs between two rounds refused for one cause: file names, ids, counts.
_VARYING = re.compile(r"\S*/\S*|[0-9a-f]{8}-[0-9a-f-]{27}|\d+")


class CommitRefused(RuntimeError):
    """A table's commit was refused for the same cause too many rounds in a row."""


class RepeatedRefusals:
    def __init__(self, limit: int, conflicts: int | None = None) -> None:
        self._limit = limit
        self._conflict_limit = conflicts
        self._streaks: dict[str, tuple[str, int]] = {}  # table -> (its refusal's cause, rounds in a row)
        self._conflicts: dict[str, int] = {}  # table -> rounds in a row its commit conflicted

    def observe(self, failed: Mapping[str, CommitFailed | CommitFenced],
                committed: Iterable[str]) -> CommitRefused | None:
        """Take one round's outcome: why each failed table failed, and the tables that committed. Returns
        what to fail the connector with once a table reaches the limit."""
        for table in committed:
            self._streaks.pop(table, None)
            self._conflicts.pop(table, None)
        for table, failure in sorted(failed.items()):
            why = str(failure)
            kind = failure.kind if isinstance(failure, CommitFailed) else JavaErrorKind.OTHER  # a fence: ours
            if kind is JavaErrorKind.CONFLICT:
                self._streaks.pop(table, None)
                rounds = self._conflicts[table] = self._conflicts.get(table, 0) + 1
                if self._conflict_limit is not None and rounds >= self._conflict_limit:
                    return CommitRefused(f"{why} (conflicted {rounds} rounds in a row; "
                                         "iceberg.control.commit.max-consecutive-failures)")
                continue
            self._conflicts.pop(table, None)
            if kind not in _REFUSALS:
                self._streaks.pop(table, None)  # an outage, a timeout or a fence: retried as long as it lasts
                continue
            cause = _VARYING.sub("_", why)
            previous, rounds = self._streaks.get(table, ("", 0))
            rounds = rounds + 1 if previous == cause else 1
            self._streaks[table] = (cause, rounds)
            if rounds >= self._limit:
                return CommitRefused(f"{why} (refused {rounds} rounds in a row; "
                                     "tabletopic.commit.max-consecutive-refusals)")
        return None
