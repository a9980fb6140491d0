"""The schemas log replayed by racing daemons: every reader ends with the same registry."""

from __future__ import annotations

import json

from tabletopic.kafka.clients import KafkaClients
from tabletopic.registry.schema_log import SchemaLog
from tabletopic.registry.schema_records import Write
from tabletopic.registry.schema_store import SchemaStore

V1 = json.dumps({"type": "record", "name": "r", "fields": [{"name": "a", "type": "int"}]})
V2 = json.dumps({"type": "record", "name": "r", "fields": [{"name": "a", "type": "int"},
                                                          {"name": "b", "type": "int", "default": 0}]})


def _replay(log: list[Write]) -> SchemaStore:
    store = SchemaStore()
    for write in log:
        store.apply(write.key, write.value)
    return store


def test_two_daemons_registering_at_once_agree_the_first_record_wins() -> None:
    a, b = SchemaStore(), SchemaStore()
    _, write_a = a.plan_register("s-value", V1, "AVRO", [])
    _, write_b = b.plan_register("s-value", V2, "AVRO", [])
    assert write_a and write_b and write_a.key["version"] == write_b.key["version"] == 1
    log = [write_a, write_b]  # both appended; a's came first in the one partition
    for store in (a, b):
        for write in log:
            store.apply(write.key, write.value)
    assert [s.schema for s in (a.schema(a.subjects["s-value"][1].id), b.schema(b.subjects["s-value"][1].id))] \
        == [V1, V1]
    # The loser withdraws its record (so compaction cannot bring it back), then plans again.
    log.append(Write(write_b.key, None))
    b = _replay(log)
    assert b.subjects["s-value"][1].token == write_a.key["token"]
    _, again = b.plan_register("s-value", V2, "AVRO", [])
    assert again is not None and again.key["version"] == 2
    log.append(again)
    final = _replay(log)
    assert sorted(final.subjects["s-value"]) == [1, 2]


def test_a_record_that_is_not_an_object_is_skipped_not_fatal() -> None:
    store = SchemaStore()
    log = SchemaLog(KafkaClients(["127.0.0.1:1"], {}), "_schemas", store)
    _, write = store.plan_register("s-value", V1, "AVRO", [])
    assert write is not None
    for offset, (key, value) in enumerate([(b"[1]", b"{}"), (json.dumps(write.key).encode(), b"[1, 2]"),
                                           (b"{", None), (json.dumps(write.key).encode(), b'"text"')]):
        log._apply(key, value, offset)
    log._apply(json.dumps(write.key).encode(), json.dumps(write.value).encode(), 4)
    assert list(store.subjects["s-value"]) == [1]
