"""Connect's logging API (``/admin/loggers``) over the standard library's loggers.

Every line the daemon logs goes through a ``logging`` logger (see
:mod:`tabletopic.observe.logging_setup`), so these are the levels that decide.  Levels
take log4j's names, as in Connect; ``last_modified`` is when this API last set one.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from tabletopic.observe.logging_setup import level_name, parse_level


class LoggerLevels:
    def __init__(self) -> None:
        self._modified: dict[str, int] = {}  # logger name -> ms since the epoch

    def _info(self, name: str) -> dict[str, Any]:
        logger = logging.getLogger(name if name != "root" else None)
        return {"level": level_name(logger.getEffectiveLevel()), "last_modified": self._modified.get(name)}

    def all(self) -> dict[str, dict[str, Any]]:
        """The root logger and every logger whose level is set explicitly."""
        names = {"root", *self._modified}
        names |= {n for n, lg in logging.root.manager.loggerDict.items()
                  if isinstance(lg, logging.Logger) and lg.level != logging.NOTSET}
        return {name: self._info(name) for name in sorted(names)}

    def get(self, name: str) -> dict[str, Any] | None:
        if name != "root" and name not in logging.root.manager.loggerDict:
            return None
        return self._info(name)

    def set(self, namespace: str, level_text: str) -> list[str] | None:
        """Set ``namespace`` and the loggers under it; the names changed, or None for an unknown level."""
        level = parse_level(level_text)
        if level is None:
            return None
        now = int(time.time() * 1000)
        changed = []
        if namespace == "root":
            logging.getLogger().setLevel(level)
            changed.append("root")
        else:
            logging.getLogger(namespace).setLevel(level)
            changed.append(namespace)
            prefix = namespace + "."
            for name, logger in list(logging.root.manager.loggerDict.items()):
                if name.startswith(prefix) and isinstance(logger, logging.Logger) and logger.level != logging.NOTSET:
                    logger.setLevel(level)  # a child set on its own would not follow its parent otherwise
                    changed.append(name)
        for name in changed:
            self._modified[name] = now
        return sorted(changed)
