"""How hard the property tests search.

The unit lane runs each property test at a fifth of its full count of examples, so that the lane stays
fast; ``TABLETOPIC_FUZZ_DEPTH=1`` runs every test at its full count, and a larger number runs more.
A failing example Hypothesis found once is replayed first by every later run, at any depth.
"""

from __future__ import annotations

import os

DEPTH = float(os.environ.get("TABLETOPIC_FUZZ_DEPTH", "0.2"))


def examples(full: int) -> int:
    """The examples a property test runs: ``full`` at depth 1, never fewer than 25."""
    return max(25, round(full * DEPTH))
