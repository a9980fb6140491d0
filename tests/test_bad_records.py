"""Bad records: errors.tolerance=none stops before them, =all moves them to the dead-letter topic."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tabletopic.write.spark_session import SparkRuntime
from tests.connect_json import json_envelope
from tests.support import (
    DaemonProcess,
    Warehouse,
    connector_props,
    create_topic,
    failed_task_trace,
    listening_daemon,
    produce,
    read_topic,
    run_in_process,
    unique,
    wait_until,
    worker_props,
)


def _good(i: int) -> bytes:
    return json.dumps({"id": i, "amount": i * 10, "note": f"n{i}"}).encode()


BAD = [
    b"\x00\x01garbage",                                   # not JSON at all
    b"[1, 2, 3]",                                        # JSON, but not an object
    json.dumps({"id": 5000, "amount": "lots"}).encode(),  # an object that does not fit the table
]


def _make_table(warehouse: Warehouse, table: str) -> None:
    warehouse.sql(f"CREATE TABLE {{c}}.{table} (id bigint, amount bigint, note string) USING iceberg "
                  "TBLPROPERTIES ('format-version'='2')")


def test_tolerance_all_sends_bad_records_to_the_dead_letter_topic(
        bootstrap: str, spark: SparkRuntime, warehouse: Warehouse) -> None:
    topic, dlq = unique("poison"), unique("dlq")
    create_topic(bootstrap, topic, 2)
    create_topic(bootstrap, dlq, 1)
    table = "dlq.events"
    _make_table(warehouse, table)
    records, bad_at = [], []
    for i in range(3000):
        if i % 1000 == 500:
            bad = BAD[len(bad_at)]
            bad_at.append(i)
            records.append((b"bad", bad, 0))
        records.append((str(i).encode(), _good(i), i % 2))
    produce(bootstrap, topic, records, headers=[("origin", b"test")])
    connector = connector_props("tolerant", topic, table, warehouse, {
        "value.converter.schemas.enable": "false", "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq,
        "errors.deadletterqueue.context.headers.enable": "true", "errors.log.enable": "true",
        "iceberg.control.commit.interval-ms": "1000"})
    code, daemon = run_in_process(spark, worker_props(bootstrap), [connector],
        until=lambda d: sum(d.connectors[0].task.committed_offsets(table).values()) >= len(records))
    assert code == 0
    got = warehouse.sql(f"SELECT count(*), count(DISTINCT id), sum(amount), min(id), max(id) FROM {{c}}.{table}")[0]
    assert tuple(got) == (3000, 3000, sum(i * 10 for i in range(3000)), 0, 2999)
    dead = read_topic(bootstrap, dlq, len(BAD))
    assert sorted(v for v, _ in dead) == sorted(BAD)
    for _, headers in dead:
        assert headers["origin"] == b"test"  # the record's own headers are kept
        assert headers["__connect.errors.topic"] == topic.encode()
        assert headers["__connect.errors.partition"] == b"0"
        assert int(headers["__connect.errors.offset"]) >= 0
        assert headers["__connect.errors.exception.message"]
    stages = {v: h["__connect.errors.stage"] for v, h in dead}
    assert stages[BAD[0]] == b"VALUE_CONVERTER" and stages[BAD[2]] == b"TASK_PUT"
    name = daemon.connectors[0].config.name
    assert daemon.registry.get_sample_value("tabletopic_dead_letter_records_total", {"connector": name}) == len(BAD)


def test_tolerance_none_stops_before_the_bad_record_and_resumes_when_allowed(
        bootstrap: str, warehouse: Warehouse, tmp_path: Path) -> None:
    topic, dlq = unique("strict"), unique("strict_dlq")
    create_topic(bootstrap, topic, 1)
    create_topic(bootstrap, dlq, 1)
    table = "strict.events"
    _make_table(warehouse, table)
    produce(bootstrap, topic, [(None, _good(i), 0) for i in range(200)])
    produce(bootstrap, topic, [(None, BAD[0], 0)])  # offset 200
    produce(bootstrap, topic, [(None, _good(i), 0) for i in range(200, 400)])
    connector = connector_props("strict", topic, table, warehouse, {
        "value.converter.schemas.enable": "false", "iceberg.control.commit.interval-ms": "1000"})
    group = f"connect-{connector['name']}"
    # A supervisor restarts a daemon that exits; without exit-on-connector-failure it stays up, FAILED.
    daemon = DaemonProcess(tmp_path, worker_props(bootstrap, **{"tabletopic.exit-on-connector-failure": "true"}),
                           [connector]).start()
    code = daemon.wait(timeout=180)
    output = daemon.output()
    assert code == 1, output[-3000:]
    assert f"record {topic}[0]@200 failed in convert" in output
    assert "errors.tolerance=all" in output  # says how to go on
    committed = warehouse.offsets(table, group).get((topic, 0), 0)
    assert committed <= 200
    ids = sorted(r.id for r in warehouse.rows(table, "id"))
    assert ids == list(range(committed))  # everything before the commit point, nothing after

    # The operator lets it skip: the bad record goes to the dead-letter topic, nothing is lost.
    connector.update({"errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq})
    daemon = DaemonProcess(tmp_path, worker_props(bootstrap), [connector])
    daemon.runs = 1
    daemon.start()
    wait_until(lambda: warehouse.offsets(table, group).get((topic, 0), 0) >= 401, 120, "all offsets", daemon)
    assert daemon.terminate() == 0
    ids = sorted(r.id for r in warehouse.rows(table, "id"))
    assert ids == list(range(400))
    assert [v for v, _ in read_topic(bootstrap, dlq, 1)] == [BAD[0]]


SCHEMA = {"type": "struct", "optional": False, "fields": [
    {"field": "id", "type": "int64", "optional": False}, {"field": "amount", "type": "int64", "optional": False},
    {"field": "note", "type": "string", "optional": True}]}


def test_json_that_does_not_match_its_schema_goes_to_the_dead_letter_topic(
        bootstrap: str, spark: SparkRuntime, warehouse: Warehouse) -> None:
    topic, dlq, table = unique("mismatch"), unique("mismatch_dlq"), "dlq.mismatch"
    create_topic(bootstrap, topic, 2)
    create_topic(bootstrap, dlq, 1)
    bad = [json_envelope(SCHEMA, {"id": 1, "amount": "a lot", "note": None}),  # a string in an int64 field
           json_envelope(SCHEMA, {"id": 2, "amount": None, "note": "x"}),      # a required field left null
           json_envelope({"type": "struct", "fields": [{"field": "id", "type": "uint128"}]}, {"id": 3})]
    records = [(None, json_envelope(SCHEMA, {"id": i, "amount": i, "note": f"n{i}"}), i % 2) for i in range(10_000)]
    for n, value in enumerate(bad):
        records.insert(2000 + n * 3000, (None, value, n % 2))
    produce(bootstrap, topic, records)
    code, _ = run_in_process(spark, worker_props(bootstrap), [connector_props("mismatch", topic, table, warehouse, {
        "iceberg.tables.auto-create-enabled": "true", "errors.tolerance": "all",
        "errors.deadletterqueue.topic.name": dlq, "errors.deadletterqueue.context.headers.enable": "true",
        "iceberg.control.commit.interval-ms": "1000"})],
        until=lambda d: sum(d.connectors[0].task.committed_offsets(table).values()) >= len(records))
    assert code == 0
    got = warehouse.sql(f"SELECT count(*), count(DISTINCT id), sum(amount) FROM {{c}}.{table}")[0]
    assert tuple(got) == (10_000, 10_000, sum(range(10_000)))
    dead = read_topic(bootstrap, dlq, len(bad))
    assert sorted(v for v, _ in dead) == sorted(bad)
    reasons = {v: h["__connect.errors.exception.message"].decode() for v, h in dead}
    assert "does not match its schema" in reasons[bad[0]]
    assert "required" in reasons[bad[1]] and "uint128" in reasons[bad[2]]


KIND_SCHEMA = {"type": "struct", "optional": False, "fields": [
    {"field": "table", "type": "string", "optional": True},
    {"field": "id", "type": "int64", "optional": False},
    {"field": "blob", "type": "bytes", "optional": True},
    {"field": "price", "type": "bytes", "optional": True, "name": "org.apache.kafka.connect.data.Decimal",
     "parameters": {"scale": "2"}},
    {"field": "at", "type": "int64", "optional": True, "name": "org.apache.kafka.connect.data.Timestamp"}]}


def _kind(table: object, i: int, **fields: object) -> bytes:
    schema = KIND_SCHEMA
    if isinstance(table, dict):  # a route field that is a struct
        schema = {**KIND_SCHEMA, "fields": [{"field": "table", "type": "struct", "optional": True, "fields": [
            {"field": "x", "type": "string", "optional": True}]}, *KIND_SCHEMA["fields"][1:]]}
    payload = {"table": table, "id": i, "blob": "AAEC", "price": "AMg=", "at": 1_790_000_000_000, **fields}
    return json_envelope(schema, payload)


BAD_KINDS = {
    "deeply nested JSON": b'{"schema": null, "payload": ' + b'{"a": ' * 5000 + b"1" + b"}" * 5001,
    "bytes that are not base64": _kind("bad_kinds.good", 90_001, blob="not base64!!"),
    "a Decimal that is not base64": _kind("bad_kinds.good", 90_002, price="%%%"),
    "a Timestamp out of range": _kind("bad_kinds.good", 90_003, at=2**62),
    "an empty route value": _kind("", 90_004),
    "a route value that is not a table name": _kind("ns.", 90_005),
    "a route value that is a struct": _kind({"x": "bad_kinds.good"}, 90_006),
    "a bad record bigger than a default request": b"\x00" + b"x" * 1_200_000,
}


def test_every_kind_of_bad_record_goes_to_the_dead_letter_topic(
        bootstrap: str, spark: SparkRuntime, warehouse: Warehouse) -> None:
    topic, dlq = unique("bad_kinds"), unique("bad_kinds_dlq")
    create_topic(bootstrap, topic, 2)
    create_topic(bootstrap, dlq, 1)
    table = "bad_kinds.good"
    records = []
    bad = list(BAD_KINDS.values())
    for i in range(2000):
        if i % 250 == 100 and bad:
            records.append((b"bad", bad.pop(0), i % 2))
        records.append((str(i).encode(), _kind(table, i), i % 2))
    produce(bootstrap, topic, records, max_request_size=4 * 1024 * 1024)
    code, _ = run_in_process(spark, worker_props(bootstrap), [connector_props("kinds", topic, None, warehouse, {
        "value.converter.schemas.enable": "true", "iceberg.tables.dynamic-enabled": "true",
        "iceberg.tables.route-field": "table", "iceberg.tables.auto-create-enabled": "true", "errors.tolerance": "all",
        "errors.deadletterqueue.topic.name": dlq, "errors.deadletterqueue.context.headers.enable": "true",
        "iceberg.control.commit.interval-ms": "1000"})],
        until=lambda d: sum(d.connectors[0].task.committed_offsets(table).values()) >= len(records))
    assert code == 0
    got = warehouse.sql(f"SELECT count(*), count(DISTINCT id), sum(id) FROM {{c}}.{table}")[0]
    assert tuple(got) == (2000, 2000, sum(range(2000)))
    dead = read_topic(bootstrap, dlq, len(BAD_KINDS))
    assert sorted(v for v, _ in dead) == sorted(BAD_KINDS.values())


def _deep(n: int, i: int) -> bytes:
    return b'{"id": %d, "deep": ' % i + b"[" * n + b"]" * n + b"}"


# Values no parser may be given: each must end in the dead-letter topic, and the daemon must live on.
HOSTILE = {
    "nested 1,000 deep": (_deep(1000, -1), "nested deeper than 1000"),
    "nested 100,000 deep": (_deep(100_000, -2), "nested deeper than 1000"),
    "nested 10,000,000 deep (20 MB)": (_deep(10_000_000, -3), "tabletopic.input.max-value-bytes"),
    "a 1.6 MB unterminated string": (b'{"id": -4, "note": "' + b"a" * 1_600_000, "not valid JSON"),
    "a 50 MB value, over the fetch size": (b'{"id": -5, "note": "' + b"b" * 50_000_000 + b'"}',
                                          "tabletopic.input.max-value-bytes"),
}


def test_no_value_kills_the_daemon_each_goes_to_the_dead_letter_topic_with_its_reason(
        bootstrap: str, warehouse: Warehouse, tmp_path: Path) -> None:
    """Plain JSON (schemas.enable=false), as most connectors read it: Arrow's JSON reader parses it."""
    topic, dlq, table = unique("hostile"), unique("hostile_dlq"), "dlq.hostile"
    create_topic(bootstrap, topic, 2)
    create_topic(bootstrap, dlq, 1)
    _make_table(warehouse, table)
    records, hostile = [], [value for value, _ in HOSTILE.values()]
    for i in range(2000):
        if i % 400 == 200:
            records.append((b"bad", hostile.pop(0), i % 2))
        records.append((str(i).encode(), _good(i), i % 2))
    produce(bootstrap, topic, records, max_request_size=64 * 1024 * 1024)
    connector = connector_props("hostile", topic, table, warehouse, {
        "value.converter.schemas.enable": "false", "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq,
        "errors.deadletterqueue.context.headers.enable": "true", "iceberg.control.commit.interval-ms": "1000"})
    group = f"connect-{connector['name']}"
    daemon = DaemonProcess(tmp_path, worker_props(bootstrap), [connector]).start()
    wait_until(lambda: sum(warehouse.offsets(table, group).values()) == len(records), 180, "every offset", daemon)
    assert daemon.alive()
    assert daemon.terminate() == 0, daemon.output()[-3000:]
    got = warehouse.sql(f"SELECT count(*), count(DISTINCT id), sum(amount), min(id) FROM {{c}}.{table}")[0]
    assert tuple(got) == (2000, 2000, sum(i * 10 for i in range(2000)), 0)
    dead = read_topic(bootstrap, dlq, len(HOSTILE))
    assert len(dead) == len(HOSTILE)
    by_value = {v: h["__connect.errors.exception.message"].decode() for v, h in dead}
    for name, (value, reason) in HOSTILE.items():
        assert value in by_value, f"{name} is not in the dead-letter topic"
        assert reason in by_value[value], (name, by_value[value])


def test_a_hostile_value_under_tolerance_none_fails_the_connector_not_the_daemon(
        bootstrap: str, warehouse: Warehouse, tmp_path: Path) -> None:
    topic, table = unique("hostile_none"), "dlq.hostile_none"
    create_topic(bootstrap, topic, 1)
    _make_table(warehouse, table)
    produce(bootstrap, topic, [(None, _good(i), 0) for i in range(200)] + [(None, _deep(100_000, -1), 0)]
            + [(None, _good(i), 0) for i in range(200, 400)])
    connector = connector_props("hostile_none", topic, table, warehouse, {
        "value.converter.schemas.enable": "false", "iceberg.control.commit.interval-ms": "1000"})
    daemon, rest = listening_daemon(tmp_path, bootstrap, [connector])
    # As in Connect, the task fails, naming the record; the connector and the worker stay up.
    trace = failed_task_trace(rest, connector["name"], daemon)
    assert f"record {topic}[0]@200 failed in convert" in trace and "nested deeper than 1000" in trace, trace
    assert daemon.alive() and rest.status_of("/health") == 200
    # 1: the failed task could make no last commit (docs/running.md); never a signal's negative code.
    assert daemon.terminate() in (0, 1), daemon.output()[-3000:]
    committed = warehouse.offsets(table, f"connect-{connector['name']}").get((topic, 0), 0)
    assert committed <= 200
    assert sorted(r.id for r in warehouse.rows(table, "id")) == list(range(committed))


KILL_KINDS = {
    "a Timestamp out of range": _kind("kill_dlq.good", -1, at=10**17),
    "a route value that is a struct": _kind({"x": "kill_dlq.good"}, -2),
    "a value nested 100,000 deep": b'{"schema": null, "payload": ' + b'{"a": ' * 100_000 + b"1" + b"}" * 100_001,
}


@pytest.mark.timeout(420)
@pytest.mark.slow
def test_a_daemon_killed_after_each_bad_records_commit_dead_letters_each_once_and_loses_nothing(
        bootstrap: str, warehouse: Warehouse, tmp_path: Path) -> None:
    """KIP-610's order: a bad record is in the dead-letter topic before any snapshot's offsets pass it.
    So a SIGKILL right after that snapshot neither loses it nor sends it twice."""
    topic, dlq, table = unique("kill_dlq"), unique("kill_dlq_dead"), "kill_dlq.good"
    create_topic(bootstrap, topic, 1)
    create_topic(bootstrap, dlq, 1)
    connector = connector_props("kill_dlq", topic, None, warehouse, {
        "value.converter.schemas.enable": "true", "iceberg.tables.dynamic-enabled": "true",
        "iceberg.tables.route-field": "table", "iceberg.tables.auto-create-enabled": "true", "errors.tolerance": "all",
        "errors.deadletterqueue.topic.name": dlq, "iceberg.control.commit.interval-ms": "1000"})
    group = f"connect-{connector['name']}"
    daemon = DaemonProcess(tmp_path, worker_props(bootstrap), [connector]).start()
    produced, good = 0, 0
    for bad in KILL_KINDS.values():
        records = [(None, _kind(table, good + i), 0) for i in range(300)] + [(b"bad", bad, 0)] + \
                  [(None, _kind(table, good + 300 + i), 0) for i in range(300)]
        produce(bootstrap, topic, records, max_request_size=4 * 1024 * 1024)
        bad_offset = produced + 300
        produced, good = produced + len(records), good + 600
        wait_until(lambda o=bad_offset: warehouse.offsets(table, group).get((topic, 0), 0) > o, 120,
                   f"a commit past the bad record at {bad_offset}", daemon, every=0.05)
        daemon.kill()  # right after the commit that passes it
        daemon.start()
    # The last restart reads on: more good records, committed by it.
    produce(bootstrap, topic, [(None, _kind(table, good + i), 0) for i in range(100)])
    produced, good = produced + 100, good + 100
    wait_until(lambda: warehouse.offsets(table, group).get((topic, 0), 0) == produced, 120, "every offset", daemon)
    assert daemon.terminate() == 0, daemon.output()[-3000:]
    count, distinct, total = warehouse.sql(f"SELECT count(*), count(DISTINCT id), sum(id) FROM {{c}}.{table}")[0]
    assert (count, distinct, total) == (good, good, sum(range(good)))
    names = {value: name for name, value in KILL_KINDS.items()}
    dead = Counter(names.get(v or b"", f"another record of {len(v or b'')} bytes")
                   for v, _ in read_topic(bootstrap, dlq, len(KILL_KINDS)))
    assert dead == Counter(KILL_KINDS.keys()), dead  # each once: none lost, none sent twice
