"""Filter and predicates on a chain, as Connect's TransformationStage applies them: a transform with a
predicate changes only the records the predicate matches (or, negated, does not)."""

from __future__ import annotations

import datetime as dt

import pytest

from tests.unit.plugins.transforms.smt import batch, chain, predicate, spec, tombstones, values

FILTER = "org.apache.kafka.connect.transforms.Filter"


def test_filter_without_a_predicate_drops_everything_tombstones_included() -> None:
    assert chain(spec(FILTER)).apply(batch([{"a": 1}])).batches == []
    assert chain(spec(FILTER)).apply(tombstones(2)).batches == []


@pytest.mark.parametrize(("negate", "kept"), [(False, [{"a": 1}]), (True, [None])])
def test_filter_with_record_is_tombstone(negate: bool, kept: list[object]) -> None:
    steps = chain(spec(FILTER, predicate="tomb", negate=negate),
                  predicates=(predicate("RecordIsTombstone", alias="tomb"),))
    for records in (batch([{"a": 1}]), tombstones(1)):
        out = steps.apply(records)
        assert values(out) in ([], kept)
    assert values(steps.apply(batch([{"a": 1}]))) + values(steps.apply(tombstones(1))) == kept


def test_a_transform_applies_to_the_topics_its_predicate_matches_only() -> None:
    steps = chain(spec("org.apache.kafka.connect.transforms.TimestampConverter$Value",
                       {"field": "ts", "target.type": "Timestamp"}, predicate="orders"),
                  predicates=(predicate("TopicNameMatches", {"pattern": "ord.*"}, alias="orders"),))
    assert values(steps.apply(batch([{"ts": 0}], topic="orders"))) == [{"ts": dt.datetime(1970, 1, 1, tzinfo=dt.UTC)}]
    assert values(steps.apply(batch([{"ts": 0}], topic="payments"))) == [{"ts": 0}]


def test_topic_name_matches_sees_the_topic_an_earlier_transform_gave() -> None:
    steps = chain(spec("RegexRouter", {"regex": ".*", "replacement": "renamed"}, alias="r"),
                  spec(FILTER, predicate="p", alias="f"),
                  predicates=(predicate("TopicNameMatches", {"pattern": "renamed"}),))
    assert steps.apply(batch([{"a": 1}], topic="orig")).batches == []


def test_has_header_key_sees_headers_an_earlier_transform_set() -> None:
    headers = [[("trace", b"1")], [], [("other", b"x"), ("trace", b"2")]]
    steps = chain(spec("DropHeaders", {"headers": "other"}, alias="d"),
                  spec("InsertHeader", {"header": "kept", "value.literal": "yes"}, alias="i"),
                  spec(FILTER, predicate="p", negate=True, alias="f"),
                  predicates=(predicate("HasHeaderKey", {"name": "trace"}),))
    out = steps.apply(batch([{"a": i} for i in range(3)], headers=headers))
    assert values(out) == [{"a": 0}, {"a": 2}]
    (kept,) = out.batches
    assert kept.headers == [[("trace", b"1"), ("kept", "yes")], [("trace", b"2"), ("kept", "yes")]]
    assert steps.needs_headers and not steps.needs_key


def test_a_predicate_that_matches_some_records_splits_the_batch() -> None:
    steps = chain(spec("org.apache.kafka.connect.transforms.InsertField$Value",
                       {"static.field": "tagged", "static.value": "yes"}, predicate="p"),
                  predicates=(predicate("HasHeaderKey", {"name": "h"}),))
    out = steps.apply(batch([{"a": 0}, {"a": 1}], headers=[[("h", b"")], []]))
    assert sorted(map(str, values(out))) == sorted(map(str, [{"a": 0, "tagged": "yes"}, {"a": 1}]))
