"""Connect's predicates TopicNameMatches, HasHeaderKey and RecordIsTombstone, with Connect's tests' cases as facts."""

from __future__ import annotations

import pytest

from tabletopic.config.connector_keys import PREDICATE_GROUP
from tabletopic.config.plugin_names import available_plugins
from tests.unit.plugins.transforms.smt import batch, tombstones


@pytest.mark.parametrize(("name", "props", "error"), [
    ("org.apache.kafka.connect.transforms.predicates.TopicNameMatches", {}, "Missing required configuration"),
    ("org.apache.kafka.connect.transforms.predicates.TopicNameMatches", {"pattern": ""}, "must be non-empty"),
    ("org.apache.kafka.connect.transforms.predicates.TopicNameMatches", {"pattern": "("}, "Java-compatible"),
    ("org.apache.kafka.connect.transforms.predicates.HasHeaderKey", {}, "Missing required configuration"),
])
def test_predicate_settings_connect_refuses(name: str, props: dict[str, str], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        available_plugins(PREDICATE_GROUP)[name].load()().configure(props)


def test_record_is_tombstone_and_topic_name_matches_answer_per_record() -> None:
    is_tombstone = available_plugins(PREDICATE_GROUP)[
        "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone"].load()()
    is_tombstone.configure({})
    assert is_tombstone.test(tombstones(2)).tolist() == [True, True]
    assert is_tombstone.test(batch([{"a": 1}])).tolist() == [False]
    matches = available_plugins(PREDICATE_GROUP)[
        "org.apache.kafka.connect.transforms.predicates.TopicNameMatches"].load()()
    matches.configure({"pattern": "my-prefix-.*"})
    assert matches.test(batch([{"a": 1}], topic="my-prefix-orders")).tolist() == [True]
    assert matches.test(batch([{"a": 1}], topic="x-my-prefix-orders")).tolist() == [False]
