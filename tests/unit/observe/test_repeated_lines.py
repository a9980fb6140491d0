"""Library lines during an outage: each kind once a window, with how many were held back."""

from __future__ import annotations

import logging

import pytest

from tabletopic.observe.repeated_lines import RETRIED_BY_AIOKAFKA, RepeatedLines


def _record(name: str, level: int, msg: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, msg, args, None)


def test_a_broker_down_for_ten_minutes_is_a_line_a_minute_per_kind_with_its_count() -> None:
    """aiokafka's "Unable connect to node" every 10 ms for 600 s: 60,000 records, ten lines."""
    now = [0.0]
    lines = RepeatedLines(("aiokafka",), window_s=60.0, clock=lambda: now[0])
    passed = []
    for n in range(60_000):
        now[0] = n / 100
        record = _record("aiokafka.client", logging.ERROR, "Unable connect to node with id %s: %s", n % 3, "refused")
        if lines.filter(record):
            passed.append(record)
    assert len(passed) == 10
    assert passed[0].getMessage() == "Unable connect to node with id 0: refused"
    assert passed[1].getMessage() == "Unable connect to node with id 0: refused [5999 more like it in the last 60 s]"
    assert {r.levelname for r in passed} == {"WARNING"}  # retried by aiokafka itself: a warning, as Connect's


@pytest.mark.parametrize(("name", "level", "msg", "kept_level", "deduplicated"), [
    ("aiokafka.consumer.fetcher", logging.ERROR, "Failed fetch messages from %s: %s", "WARNING", True),
    ("aiokafka.cluster", logging.ERROR, "Topic %s is not authorized for this client", "ERROR", True),  # not retried
    ("spark", logging.WARNING, "Retrying connect to server: 127.0.0.1:9 (retry %s)", "WARNING", True),
    ("aiokafka.client", logging.INFO, "Unable to update metadata from %s", "INFO", False),  # below warnings
    ("tabletopic.commit.coordinator", logging.ERROR, "commit failed %s", "ERROR", False),  # the daemon's own
])
def test_which_lines_are_lowered_and_which_deduplicated(name: str, level: int, msg: str, kept_level: str,
                                                        deduplicated: bool) -> None:
    lines = RepeatedLines(("aiokafka", "spark"), clock=lambda: 0.0)
    records = [_record(name, level, msg, 1, "x") for _ in range(3)]
    passed = [r for r in records if lines.filter(r)]
    assert len(passed) == (1 if deduplicated else 3)
    assert passed[0].levelname == kept_level


def test_the_templates_lowered_are_aiokafkas_own() -> None:
    """Each template is a line aiokafka logs at ERROR today: one renamed there would stay an error here."""
    import inspect

    import aiokafka.client
    import aiokafka.consumer.fetcher
    import aiokafka.consumer.group_coordinator
    import aiokafka.producer.sender

    source = "".join(inspect.getsource(m) for m in (aiokafka.client, aiokafka.consumer.fetcher,
                                                    aiokafka.consumer.group_coordinator, aiokafka.producer.sender))
    missing = [t for t in RETRIED_BY_AIOKAFKA if repr(t) not in source and f'"{t}"' not in source]
    assert missing == []


def test_kinds_remembered_are_bounded() -> None:
    lines = RepeatedLines(("kafka",), clock=lambda: 0.0)
    for n in range(5000):
        assert lines.filter(_record("kafka", logging.WARNING, f"node {chr(65 + n % 26)}{chr(65 + n // 26 % 26)}"
                                                             f"{chr(65 + n // 676)} gone"))
    assert len(lines._kinds) == 1000
