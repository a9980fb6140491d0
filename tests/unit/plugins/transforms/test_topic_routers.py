"""RegexRouter and TimestampRouter, with Connect's RegexRouterTest and TimestampRouterTest cases as facts."""

from __future__ import annotations

import pytest

from tabletopic.config.connector_keys import TRANSFORM_GROUP
from tabletopic.config.plugin_names import available_plugins
from tests.unit.plugins.transforms.smt import batch, run, topics, values

REGEX = "org.apache.kafka.connect.transforms.RegexRouter"
TIMESTAMP = "org.apache.kafka.connect.transforms.TimestampRouter"


@pytest.mark.parametrize(("regex", "replacement", "topic", "expected"), [
    ("foo", "bar", "foo", "bar"),
    ("foo", "bar", "sometopic", "sometopic"),
    ("orig", "distinct", "original", "original"),  # the whole topic must match
    ("(.*)", "$1", "orig", "orig"),
    ("(.*)", "prefix-$1", "orig", "prefix-orig"),
    ("(.*)", "$1-suffix", "orig", "orig-suffix"),
    ("(.*)-(\\d\\d\\d\\d\\d\\d\\d\\d)", "$1", "index-20160117", "index"),
    ("(?<db>[a-z]+)\\.(?<table>[a-z]+)", "${table}_in_${db}", "shop.orders", "orders_in_shop"),
    ("a|ab", "X", "ab", "Xb"),  # replaceFirst replaces the first match, not the whole one
    ("(.*)", "\\$1", "t", "$1"),
    ("cdc\\.(.*)", "$1", "cdc.topic", "topic"),
])
def test_regex_router(regex: str, replacement: str, topic: str, expected: str) -> None:
    out = run(REGEX, {"regex": regex, "replacement": replacement}, batch([{"a": 1}], topic=topic))
    assert topics(out) == [expected]
    assert out.batches[0].topic == topic  # the source topic stays, for the offsets


@pytest.mark.parametrize(("regex", "replacement", "error"), [
    ("(", "x", "not a regular expression"),
    ("(.*)", "$2", "No group 2"),  # Connect fails every record it routes; here the setting is refused
    ("(a+)", "${name}", "No group with name"),
    ("(.*)", "$", "group index is missing"),
])
def test_settings_that_cannot_route_are_refused(regex: str, replacement: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        available_plugins(TRANSFORM_GROUP)[REGEX].load()().configure({"regex": regex, "replacement": replacement})


def test_timestamp_router_default_format() -> None:
    out = run(TIMESTAMP, {}, batch([{"a": 1}], topic="test", timestamps=[1483425001864]))
    assert topics(out) == ["test-20170103"]


def test_timestamp_router_splits_a_batch_by_its_days() -> None:
    day = 86_400_000
    records = batch([{"a": i} for i in range(3)], topic="t", timestamps=[0, day, 1])
    out = run(TIMESTAMP, {"topic.format": "${timestamp}_${topic}", "timestamp.format": "yyyy.MM.dd"}, records)
    assert topics(out) == ["1970.01.01_t", "1970.01.02_t", "1970.01.01_t"]
    assert values(out) == [{"a": 0}, {"a": 1}, {"a": 2}]
