"""The compatibility levels, and which schemas each one compares: the same for every schema type."""

from __future__ import annotations

from typing import TypeVar

S = TypeVar("S")

LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE")


def pairs(level: str, new: S, previous: list[S]) -> list[tuple[S, S, bool]]:
    """(original, update, backward) triples to check under ``level``: BACKWARD compares each earlier
    schema (original) with the new one (update), FORWARD the other way round, FULL both; the transitive
    levels every live version (``previous``, oldest first), the others only the latest."""
    if level == "NONE" or not previous:
        return []
    against = previous if level.endswith("_TRANSITIVE") else previous[-1:]
    base = level.removesuffix("_TRANSITIVE")
    out: list[tuple[S, S, bool]] = []
    for old in against:
        if base in ("BACKWARD", "FULL"):
            out.append((old, new, True))
        if base in ("FORWARD", "FULL"):
            out.append((new, old, False))
    return out
