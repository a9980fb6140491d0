"""structlog set-up: JSON lines by default, readable lines on a terminal.

Logging is process-wide by nature, so this is called once by the CLI; library
code only asks for loggers and binds context (connector, table, topic, partition).
"""

from __future__ import annotations

import logging
import sys

import structlog

from tabletopic.config.secrets import Scrubber


class _ScrubFilter(logging.Filter):
    """Library log records (Faust, aiokafka, py4j) lose any secret they echo, like structlog's events."""

    def __init__(self, scrubber: Scrubber) -> None:
        super().__init__()
        self._scrubber = scrubber

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = self._scrubber.scrub(record.getMessage()), None
        return True


def configure_logging(level: str = "INFO", fmt: str = "auto", scrubber: Scrubber | None = None) -> None:
    use_console = fmt == "console" or (fmt == "auto" and sys.stderr.isatty())
    scrubber = scrubber or Scrubber()
    processors: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        scrubber,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
    ]
    if use_console:
        processors.append(structlog.dev.ConsoleRenderer(exception_formatter=structlog.dev.plain_traceback))
    else:
        processors += [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()]
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level)),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    # Faust, aiokafka and py4j log through the standard library: keep their warnings, not their chatter.
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    for handler in logging.getLogger().handlers:
        handler.addFilter(_ScrubFilter(scrubber))
    for noisy in ("faust", "mode", "aiokafka", "py4j"):
        logging.getLogger(noisy).setLevel(logging.WARNING if level != "DEBUG" else logging.INFO)
