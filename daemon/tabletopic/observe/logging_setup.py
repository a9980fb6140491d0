"""One log format for every line the daemon prints: its own, Faust's, aiokafka's, py4j's and the JVM's.

structlog renders through the standard library: every logger, ours and the libraries',
is a ``logging`` logger with one handler whose formatter is structlog's, so
``log.format=json`` gives JSON lines only.  The Spark driver JVM writes log4j text to
its own stdout; :func:`relay_lines` reads that pipe and logs each line under the
``spark`` logger, so it too comes out in the one format.

Levels live on the standard library's loggers, so ``PUT /admin/loggers/<name>``
(Connect's logging API, :mod:`tabletopic.rest.loggers`) changes them at run time.
Logging is process-wide by nature: the CLI calls :func:`configure_logging` once.
"""

from __future__ import annotations

import io
import logging
import os
import re
import select
import sys
import threading
from collections.abc import Iterator
from typing import IO

import structlog

from tabletopic.observe.repeated_lines import RepeatedLines
from tabletopic.observe.secrets import Scrubber

# Libraries that chat at INFO: kept at WARNING unless the daemon logs at DEBUG. Faust's services log
# under the module that subclasses them (the batching consumer's).
QUIET_LOGGERS = ("faust", "mode", "aiokafka", "py4j", "kafka", "tabletopic.consume.batch_fetch")
# Libraries whose repeated warnings and errors are told once a minute with a count (the JVM's lines come
# through the "spark" logger).
LIBRARY_LOGGERS = ("faust", "mode", "aiokafka", "py4j", "kafka", "spark")
_LOG4J = re.compile(r"^\S+ \S+ (?P<level>TRACE|DEBUG|INFO|WARN|ERROR|FATAL) (?P<logger>[^:\s]+): (?P<message>.*)$")
# A throwable's lines: its class (with its message), its frames, its causes.
_TRACE = re.compile(r"^(\s|Caused by:|Suppressed:|(java|org|scala|py4j)\."
                    r"|[\w$]+(\.[\w$]+)+(Exception|Error|Throwable)\b)")
_TRACE_LINES = 60  # of one stack trace, logged; the rest are counted
_PAUSE_S = 0.2  # a JVM silent this long has finished the record it was writing
_LOG4J_LEVELS = {"TRACE": logging.DEBUG, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
                 "ERROR": logging.ERROR, "FATAL": logging.CRITICAL}


def configure_logging(level: str = "INFO", fmt: str = "auto", scrubber: Scrubber | None = None) -> None:
    use_console = fmt == "console" or (fmt == "auto" and sys.stderr.isatty())
    scrubber = scrubber or Scrubber()
    stamped: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: structlog.typing.Processor
    if use_console:
        renderer = structlog.dev.ConsoleRenderer(exception_formatter=structlog.dev.plain_traceback)
        tail: list[structlog.typing.Processor] = []
    else:
        renderer = structlog.processors.JSONRenderer()
        tail = [structlog.processors.format_exc_info]
    structlog.configure(
        processors=[structlog.stdlib.filter_by_level, *stamped, structlog.processors.StackInfoRenderer(),
                    structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*stamped, structlog.stdlib.ExtraAdder(allow=["jvm_logger"])],
        # Secrets are scrubbed last, after a library's message became the event: nothing escapes it.
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *tail, scrubber, renderer],
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    handler.addFilter(RepeatedLines(LIBRARY_LOGGERS))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    for noisy in QUIET_LOGGERS:
        logging.getLogger(noisy).setLevel(logging.WARNING if level != "DEBUG" else logging.INFO)
    logging.captureWarnings(True)


def relay_lines(stream: IO[bytes], logger_name: str = "spark", expected: tuple[str, ...] = ()) -> threading.Thread:
    """Log every line of ``stream`` (the JVM's output) until it closes, on a thread of its own.

    The pipe must always be drained, or the JVM blocks on a full pipe: the thread reads to the end
    whatever the level lets through. A log4j line and the stack trace after it are one record (a
    trace of fifty frames was fifty warnings), logged once the trace ends or the JVM pauses. Lines
    containing one of ``expected`` are warnings about the way tabletopic uses the JVM on purpose:
    they, and the stack trace after them, go to DEBUG.
    """
    logger = logging.getLogger(logger_name)

    def pump() -> None:
        level, record, extra = logging.INFO, list[str](), dict[str, str]()

        def flush() -> None:
            if record:
                kept = record[:_TRACE_LINES] + ([f"\t... {len(record) - _TRACE_LINES} more"]
                                                if len(record) > _TRACE_LINES else [])
                logger.log(level, "\n".join(kept), extra=extra)
                record.clear()

        for line in _lines(stream):
            if line is None:  # nothing came for a moment: what is held is whole
                flush()
                continue
            if not line:
                continue
            match = _LOG4J.match(line)
            quiet = any(e in line for e in expected)
            if match is not None:
                flush()
                level = logging.DEBUG if quiet else _LOG4J_LEVELS[match.group("level")]
                record.append(match.group("message"))
                extra = {"jvm_logger": match.group("logger")}
            elif _TRACE.match(line):
                # A throwable (its class and message, whatever its package) and its trace go with the
                # line they follow.
                if record:
                    record.append(line)
                else:
                    logger.log(logging.DEBUG if quiet else level, line)
            else:  # anything else (spark-submit's notes) is INFO
                flush()
                logger.log(logging.DEBUG if quiet else logging.INFO, line)
        flush()
        stream.close()

    thread = threading.Thread(target=pump, name=f"{logger_name}-log", daemon=True)
    thread.start()
    return thread


def _lines(stream: IO[bytes]) -> Iterator[str | None]:
    """``stream``'s lines, and None whenever nothing came for a moment (a pipe only: a file has no pauses)."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError, io.UnsupportedOperation):
        for raw in iter(stream.readline, b""):
            yield raw.decode(errors="replace").rstrip()
        return
    pending = b""
    while True:
        ready, _, _ = select.select([fd], [], [], _PAUSE_S)
        if not ready:
            yield None
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        *lines, pending = (pending + chunk).split(b"\n")
        for raw in lines:
            yield raw.decode(errors="replace").rstrip()
    if pending:
        yield pending.decode(errors="replace").rstrip()


LEVEL_NAMES = {logging.DEBUG: "DEBUG", logging.INFO: "INFO", logging.WARNING: "WARN", logging.ERROR: "ERROR",
               logging.CRITICAL: "FATAL"}


def level_name(level: int) -> str:
    """A level as log4j (and so Connect's logging API) names it."""
    return LEVEL_NAMES.get(level, logging.getLevelName(level))


def parse_level(name: str) -> int | None:
    """Connect's level names (log4j's: TRACE, DEBUG, INFO, WARN, ERROR, FATAL, OFF) as logging's."""
    upper = name.strip().upper()
    return {"TRACE": logging.DEBUG, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
            "WARNING": logging.WARNING, "ERROR": logging.ERROR, "FATAL": logging.CRITICAL,
            "OFF": logging.CRITICAL + 10}.get(upper)
