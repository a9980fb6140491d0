"""When a commit may carry position deletes in place of its equality deletes, beside this maintenance.

A rewrite fails on new position deletes against the files it replaces, so commits must not carry
them while the connector's own compaction of the table runs: they would make it fail again and
again.  Equality deletes need no positions and apply to the rewritten rows too; the conversion
that follows the compaction takes them.  A commit that found its rows just before a compaction
began must land before the rewrite reads the table, so the two take turns on one lock per table.

A commit expires no snapshots while the connector maintains the table (a look, or a conversion):
the maintenance reads the snapshot it loaded, with its manifests, and an expiry deletes those once
they are older than the snapshots it keeps. A rewrite also commits against that snapshot, which
Iceberg refuses once it has been expired. On a loaded machine with ``snapshots.max-count=17``, looks
failed on one or the other (2 of 6 in one run, 4 of 5 in another with only compactions spared), and
the table's files piled up. The look's own expiry step keeps the bound while looks run back to back.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

from tabletopic.config.maintenance_settings import MaintenanceSettings


class CommitPositions:
    def __init__(self, settings: Callable[[str], MaintenanceSettings], enabled: Callable[[str], bool]) -> None:
        self._settings = settings  # each table's
        self._enabled = enabled
        self._compacting: set[str] = set()
        self._maintaining: set[str] = set()
        self._turns: dict[str, threading.Lock] = {}  # per table: a commit with positions, or a compaction's start

    def _turn(self, name: str) -> threading.Lock:
        return self._turns.setdefault(name, threading.Lock())  # setdefault: one lock even when two threads race

    @contextlib.contextmanager
    def committing(self, name: str) -> Iterator[int]:
        """Around one commit of ``name``: yields the most rows the commit may read to carry
        position deletes (``CommitDeletes.resolve``), or 0 for equality deletes."""
        settings = self._settings(name)
        if not settings.converts_at_commit or not self._enabled(name):
            yield 0
            return
        with self._turn(name):
            yield 0 if name in self._compacting else settings.commit_max_rows

    def snapshot_bound(self, name: str) -> int:
        """The most snapshots a commit of ``name`` leaves before it expires the oldest; 0, none expired,
        while the connector maintains the table. Read before the commit: maintenance that starts during
        it reads a snapshot the expiry keeps (it keeps the newest)."""
        return 0 if name in self._maintaining else self._settings(name).snapshot_bound

    def maintenance_starts(self, name: str) -> None:
        self._maintaining.add(name)

    def maintenance_ends(self, name: str) -> None:
        self._maintaining.discard(name)

    def compaction_starts(self, name: str) -> None:
        """From now until :meth:`compaction_ends`, commits of ``name`` carry equality deletes; returns once
        a commit that carries positions, if one is under way, has landed."""
        self._compacting.add(name)
        with self._turn(name):
            pass

    def compaction_ends(self, name: str) -> None:
        self._compacting.discard(name)
