"""Library log lines during an outage: told once a minute with a count, not hundreds of times a second.

A broker that stops answering makes aiokafka log the same few lines at every retry, milliseconds apart
and at ERROR; a lost catalog does the same to Hadoop's and Iceberg's loggers. An operator's alerting
drowns in that. So the lines of the libraries (never tabletopic's own) are deduplicated: the first of
a kind passes, the same kind again within ``window_s`` is only counted, and the next one to pass after
the window says how many were held back. Nothing is silenced: each kind shows at least once a window.

A Kafka Connect worker logs a retriable connection failure as a warning, so aiokafka's lines of that
kind are lowered from ERROR to WARNING; what the daemon makes of the outage it logs itself.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

# aiokafka's templates of connection failures it retries by itself.
RETRIED_BY_AIOKAFKA = frozenset({
    'Unable connect to "%s:%s": %s',
    "Unable connect to node with id %s: %s",
    "Unable to update metadata from %s",
    "Group Coordinator Request failed: %s",
    "FindCoordinator Request failed: %s",
    "Failed fetch messages from %s: %s",
    "Failed fetch offsets from %s: %s",
    "Heartbeat send request failed: %s. Will retry.",
    "OffsetCommit failed before join, ignoring: %s",
})
_KINDS_KEPT = 1000  # kinds remembered at once: a library that puts ids into its messages cannot grow it
_VARYING = re.compile(r"\d+")


class RepeatedLines(logging.Filter):
    """A handler's filter: deduplicates the lines of the loggers under ``libraries``, at WARNING and up."""

    def __init__(self, libraries: tuple[str, ...], window_s: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._libraries = libraries
        self._window_s = window_s
        self._clock = clock
        self._lock = threading.Lock()  # the JVM's relay thread logs too
        self._kinds: OrderedDict[tuple[str, str], list[float | int]] = OrderedDict()  # kind -> [passed at, held]

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith(self._libraries):
            return True
        template = str(record.msg)
        if record.levelno == logging.ERROR and record.name.startswith("aiokafka") and template in RETRIED_BY_AIOKAFKA:
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        if record.levelno < logging.WARNING:
            return True
        kind = (record.name, _VARYING.sub("#", template)[:300])
        now = self._clock()
        with self._lock:
            seen = self._kinds.get(kind)
            if seen is not None and now - seen[0] < self._window_s:
                seen[1] += 1
                return False
            held = int(seen[1]) if seen is not None else 0
            self._kinds[kind] = [now, 0]
            self._kinds.move_to_end(kind)
            if len(self._kinds) > _KINDS_KEPT:
                self._kinds.popitem(last=False)
        if held:
            # The record's own template, so its arguments still format; no % of ours reaches it.
            record.msg = f"{template} [{held} more like it in the last {self._window_s:.0f} s]"
        return True
