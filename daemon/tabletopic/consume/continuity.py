"""Whether a fetched batch continues its partition where the sink stands: the rule, without Faust.

Faust's consumer fetches in its own thread, and a seek (a rebalance's, or one
after a rejected answer) can overlap a fetch.  Each batch is tagged with the
partition's *seek generation* when it was fetched (``STALE`` if a seek happened
during the fetch).  A batch is taken only where it continues the partition;
anything else is left, and the partition is read again if needed.
"""

from __future__ import annotations

from enum import Enum

STALE = -1  # the tag of a batch whose fetch overlapped a seek of its partition


class Decision(Enum):
    TAKE = "take"  # hand it to the sink (after dropping records below the position)
    SKIP = "skip"  # leave it: the records come again
    RESEEK = "reseek"  # leave it and seek the partition back to where the sink stands


def decide(position: int | None, first: int, generation: int, current: int, seek_queued: bool,
           sought_to: int | None, last_taken: int | None) -> Decision:
    """Judge a batch whose first record at or past ``position`` is ``first``.

    ``generation`` is the batch's tag, ``current`` the partition's generation now,
    ``sought_to`` the offset of the last seek made between two fetches (None if the last
    seek was not), and ``last_taken`` the tag of the last batch taken.

    A record is the same whichever fetch brought it, so a batch that continues the partition
    is taken even if a seek came after its fetch.  One that starts further on (a gap) is taken
    only in the first batch after a seek made between fetches to exactly ``position``: only
    there is the gap sure to be the log's own (compaction, transaction markers, retention)
    rather than a fetch that Faust moved.
    """
    if seek_queued:
        return Decision.SKIP  # it comes again after the seek
    if position is None or first <= position:
        return Decision.TAKE
    if generation == current and sought_to == position and last_taken != generation:
        return Decision.TAKE
    if generation not in (STALE, current):
        return Decision.SKIP  # fetched before a seek that moved the fetch back: the records come again
    return Decision.RESEEK
