"""Commits that Iceberg refuses the same way round after round: the connector fails, naming the cause.

A catalog or storage outage is retried for as long as it lasts. A refusal by Iceberg itself is not an
outage: a v3 table's "Must use DVs for position deletes", a table property its writer cannot honour, a
second writer that keeps committing under this one. It fails the same way every round, and retrying it
forever would leave the connector RUNNING while its tables stand still. So after
``iceberg.control.commit.max-consecutive-failures`` rounds in a row in which a table's commit was
refused for one cause, the coordinator stops and the connector is FAILED with that cause.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

# The Java exceptions by which Iceberg refuses a commit; a catalog or storage outage names others.
_REFUSALS = ("IllegalArgumentException", "IllegalStateException", "UnsupportedOperationException",
             "ValidationException")
# What differs between two rounds refused for one cause: file names, ids, counts.
_VARYING = re.compile(r"\S*/\S*|[0-9a-f]{8}-[0-9a-f-]{27}|\d+")


class CommitRefused(RuntimeError):
    """A table's commit was refused for the same cause too many rounds in a row."""


class RepeatedRefusals:
    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._streaks: dict[str, tuple[str, int]] = {}  # table -> (its refusal's cause, rounds in a row)

    def observe(self, failed: Mapping[str, str], committed: Iterable[str]) -> CommitRefused | None:
        """Take one round's outcome: why each failed table failed, and the tables that committed. Returns
        what to fail the connector with once a table reaches the limit."""
        for table in committed:
            self._streaks.pop(table, None)
        for table, why in sorted(failed.items()):
            if not any(refusal in why for refusal in _REFUSALS):
                self._streaks.pop(table, None)  # an outage, a timeout or a fence: retried as long as it lasts
                continue
            cause = _VARYING.sub("_", why)
            previous, rounds = self._streaks.get(table, ("", 0))
            rounds = rounds + 1 if previous == cause else 1
            self._streaks[table] = (cause, rounds)
            if rounds >= self._limit:
                return CommitRefused(f"{why} (refused {rounds} rounds in a row; "
                                     "iceberg.control.commit.max-consecutive-failures)")
        return None
