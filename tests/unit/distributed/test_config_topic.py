"""The config topic's records, read as Connect writes them, into connector specs and changes."""

from __future__ import annotations

import json

from tabletopic.connectors.config_store import RestartRequest, TargetState, TopicsReset
from tabletopic.distributed.config_topic import ConfigTopicStore
from tabletopic.kafka.clients import KafkaClients


def _store() -> tuple[ConfigTopicStore, list[object]]:
    store = ConfigTopicStore(KafkaClients(["127.0.0.1:1"], {}), "configs", 1)
    changes: list[object] = []
    store.subscribe(changes.append)
    return store, changes


def _apply(store: ConfigTopicStore, key: str, value: object, offset: int = 0) -> None:
    store._apply(key.encode(), None if value is None else json.dumps(value).encode(), offset)


def test_connect_records_make_specs_in_topic_order() -> None:
    store, changes = _store()
    _apply(store, "target-state-c", {"state": "PAUSED", "state.v2": "STOPPED"})
    _apply(store, "connector-c", {"properties": {"name": "c", "topics": "t"}})
    _apply(store, "task-c-0", {"properties": {}})  # Connect's task records are read past
    assert store.connectors()["c"].target is TargetState.STOPPED
    assert store.connectors()["c"].config == {"name": "c", "topics": "t"}
    _apply(store, "target-state-c", {"state": "PAUSED"})  # an older worker's v1 record
    assert store.connectors()["c"].target is TargetState.PAUSED
    _apply(store, "connector-c", None)
    assert store.connectors() == {}
    assert changes == ["c", "c", "c"]  # the first target state came before its connector


def test_restarts_and_topic_resets_count_only_once_replayed() -> None:
    store, changes = _store()
    _apply(store, "connector-c", {"properties": {"name": "c"}})
    _apply(store, "restart-connector-c", {"include-tasks": True, "only-failed": False})
    _apply(store, "topics-reset-c", {"reset": True})
    assert changes == ["c"]  # history, while replaying at start-up
    store._replaying = False
    _apply(store, "restart-connector-c", {"include-tasks": True, "only-failed": True, "worker_id": "h:1"})
    _apply(store, "topics-reset-c", {"reset": True})
    assert changes[1:] == [RestartRequest("c", True, True, "h:1"), TopicsReset("c")]


def test_an_unreadable_record_is_skipped_not_fatal() -> None:
    store, changes = _store()
    store._apply(b"connector-c", b"{not json", 0)
    _apply(store, "connector-d", {"properties": "not an object"})
    _apply(store, "target-state-d", {"state": "SLEEPING"})
    _apply(store, "connector-e", {"properties": {"name": "e"}})
    assert list(store.connectors()) == ["e"] and changes == ["e"]
