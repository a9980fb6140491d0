"""Table Topic mode: one connector, a topics.regex, each topic its own table, new topics picked up, SIGKILL-safe."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tabletopic.offsets.source_offsets import decode, offsets_key, round_start_key
from tabletopic.route.router import topic_table
from tabletopic.write.spark_session import SparkRuntime
from tests.support import (
    DaemonProcess,
    Warehouse,
    create_topic,
    produce,
    read_topic,
    run_in_process,
    unique,
    wait_until,
    worker_props,
)


@pytest.mark.timeout(420)
@pytest.mark.slow
def test_fifty_topics_become_their_tables_a_new_one_too_and_survive_a_sigkill_mid_round(
        bootstrap: str, warehouse: Warehouse, tmp_path: Path) -> None:
    prefix = unique("events")
    named = [f"{prefix}.orders", f"{prefix}.Clicks", f"{prefix}.user-signups"]
    topics = named + [f"{prefix}.t{i:02d}" for i in range(47)]
    late = f"{prefix}.refunds"
    partitions = {**{t: 1 for t in topics}, **{t: 2 for t in [*named, late]}}
    for topic in topics:
        create_topic(bootstrap, topic, partitions[topic])
    other = unique("other")  # matches no regex: never a table
    create_topic(bootstrap, other, 1)
    produce(bootstrap, other, [(None, b'{"id": 1}', 0)])
    namespace = "tt"
    tables = {t: topic_table(namespace, t) for t in [*topics, late]}
    assert tables[named[1]] == f"tt.{prefix}_clicks" and tables[named[2]] == f"tt.{prefix}_user_signups"
    interval_ms = 2000
    connector = {"name": unique("tabletopic"), "topics.regex": f"{prefix}\\..*",
                 "tabletopic.table-topic.enabled": "true", "tabletopic.table-topic.namespace": namespace,
                 f"iceberg.table.{tables[named[0]]}.partition-by": "bucket(id, 4)",
                 # Fewer than the tables a round writes: each round loads some of them again. And each
                 # round releases the tables the one before used: rows after a release load them again.
                 "tabletopic.tables.max-cached": "20", "tabletopic.tables.idle-release-ms": "1",
                 "iceberg.control.commit.interval-ms": str(interval_ms), **warehouse.connector_props()}
    group = f"connect-{connector['name']}"
    daemon = DaemonProcess(tmp_path, worker_props(bootstrap, **{"value.converter.schemas.enable": "false"}),
                           [connector])
    sent: dict[str, int] = {t: 0 for t in tables}

    def send(topic: str, n: int) -> None:
        first = sent[topic]
        produce(bootstrap, topic, [(None, json.dumps({"id": first + i, "topic": topic}).encode(),
                                    i % partitions[topic]) for i in range(n)])
        sent[topic] += n

    def committed(topic: str) -> int:
        return sum(warehouse.offsets(tables[topic], group).values())

    def recorded_topics(topic: str) -> set[str]:
        """The topics the newest snapshot of the topic's table names, in its offsets and its round starts."""
        summary = warehouse.snapshots(tables[topic])[-1]["summary"]
        named_there = {t for t, _ in decode(summary[offsets_key(group)])}
        return named_there | {t for t, _ in decode(summary.get(round_start_key(group)) or "{}")}

    def commits() -> int:
        return daemon.output().count('"event": "committed"')

    for topic in topics:
        send(topic, 500 if topic in named else 20)
    daemon.start()
    wait_until(lambda: all(committed(t) == sent[t] for t in topics), 180, "fifty tables", daemon)

    # A topic created while the daemon runs: its table within two intervals of the watch noticing it,
    # which lists topics once an interval (by construction, not timed here: the wait is generous).
    create_topic(bootstrap, late, 2)
    send(late, 300)
    wait_until(lambda: committed(late) == 300, 60, "the new topic's table", daemon)
    assert "new topics match topics.regex" in daemon.output()
    assert "released tables no round used" in daemon.output()  # and the late topic's rows loaded its table again
    # Each table records its own topic's partitions alone: the new topic grew no other table's summary.
    for topic in [*topics, late]:
        assert recorded_topics(topic) == {topic}, topic

    # Killed as the first table of a round that holds a wave on every topic commits: the round is cut
    # between its tables (fifty commits, eight at a time). Restarted, every table ends exact.
    before = commits()
    for topic in [*topics, late]:
        send(topic, 40)
    wait_until(lambda: commits() > before, 60, "a round's first commit", daemon, every=0.02)
    daemon.kill()
    cut = sum(committed(t) == sent[t] for t in [*topics, late])
    daemon.start()
    wait_until(lambda: all(committed(t) == sent[t] for t in tables), 180, "every table after the restart", daemon)
    assert daemon.terminate() == 0, daemon.output()[-3000:]

    for topic, table in tables.items():
        warehouse.assert_intact(table)
        got = warehouse.sql(f"SELECT count(*), count(DISTINCT id), min(topic), max(topic) FROM {{c}}.{table}")[0]
        assert tuple(got) == (sent[topic], sent[topic], topic, topic), (table, f"{cut} tables had the wave")
    spec = str(warehouse.table(tables[named[0]]).spec())
    assert "bucket[4]" in spec, spec
    assert not warehouse.exists(topic_table(namespace, other))


def test_each_topic_takes_its_own_upsert_and_cdc_keys(bootstrap: str, spark: SparkRuntime,
                                                      warehouse: Warehouse) -> None:
    """One connector, three topics: an append table, an upsert table with tombstones, a CDC table.

    Every record carries an ``op`` field, so a table that wrongly took another's keys would show:
    the append table keeps its D rows, the upsert table upserts its D rows, only the CDC table deletes.
    """
    prefix = unique("mixed")
    log_topic, users_topic, orders_topic = f"{prefix}.log", f"{prefix}.users", f"{prefix}.orders"
    for topic in (log_topic, users_topic, orders_topic):
        create_topic(bootstrap, topic, 1)
    namespace = "keys"
    log_t, users_t, orders_t = (topic_table(namespace, t) for t in (log_topic, users_topic, orders_topic))
    dlq = unique("mixed-dlq")
    connector = {"name": unique("mixed"), "topics.regex": f"{prefix}\\..*",
                 "tabletopic.table-topic.enabled": "true", "tabletopic.table-topic.namespace": namespace,
                 "value.converter.schemas.enable": "false",
                 f"iceberg.table.{users_t}.upsert-mode-enabled": "true", f"iceberg.table.{users_t}.id-columns": "id",
                 f"iceberg.table.{orders_t}.cdc-field": "op", f"iceberg.table.{orders_t}.id-columns": "id",
                 "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq,
                 "iceberg.control.commit.interval-ms": "1000", **warehouse.connector_props()}
    group = f"connect-{connector['name']}"

    def change(key: int, op: str | None, v: int = 0) -> tuple[bytes, bytes | None, int]:
        value = None if op is None else json.dumps({"id": key, "op": op, "v": v}).encode()
        return str(key).encode(), value, 0

    steps = {
        log_topic: [[change(1, "I", 1), change(1, "D", 2), change(2, None)], [change(1, "U", 3)]],
        users_topic: [[change(1, "I", 1), change(2, "I", 1), change(3, "D", 1)],
                      [change(1, "D", 2), change(2, None), change(3, "U", 4)]],
        orders_topic: [[change(1, "I", 1), change(2, "I", 1), change(7, "X", 1)],
                       [change(1, "U", 5), change(2, "D"), change(3, "D")]],
    }
    expected = [
        {log_t: [(1, "D", 2), (1, "I", 1)], users_t: [(1, "I", 1), (2, "I", 1), (3, "D", 1)],
         orders_t: [(1, "I", 1), (2, "I", 1)]},
        {log_t: [(1, "D", 2), (1, "I", 1), (1, "U", 3)], users_t: [(1, "D", 2), (3, "U", 4)],
         orders_t: [(1, "U", 5)]},
    ]
    sent = {t: 0 for t in steps}
    for step, want in enumerate(expected):
        for topic, batches in steps.items():
            produce(bootstrap, topic, batches[step])
            sent[topic] += len(batches[step])

        def done(_: object) -> bool:
            return all(sum(o for (t, _), o in warehouse.offsets(table, group).items() if t == topic) == sent[topic]
                       for topic, table in zip(steps, (log_t, users_t, orders_t), strict=True))

        code, _ = run_in_process(spark, worker_props(bootstrap), [connector], until=done)
        assert code == 0
        for table, rows in want.items():
            got = sorted((int(r.id), r.op, int(r.v)) for r in warehouse.rows(table, "id, op, v"))
            assert got == rows, table

    # The keyed tables carry their id columns as identifier fields; the append table has none.
    assert list(warehouse.table(users_t).schema().identifierFieldNames()) == ["id"]
    assert list(warehouse.table(orders_t).schema().identifierFieldNames()) == ["id"]
    assert not list(warehouse.table(log_t).schema().identifierFieldNames())
    # The one record whose op no rule knows went to the dead-letter topic, once.
    assert [json.loads(v or b"null")["op"] for v, _ in read_topic(bootstrap, dlq, 1)] == ["X"]
