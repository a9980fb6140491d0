"""Table Topic mode: one connector, a topics.regex, each topic its own table, new topics picked up, SIGKILL-safe."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

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


@pytest.mark.slow
def test_each_topic_becomes_its_table_and_a_new_topic_is_picked_up(bootstrap: str, warehouse: Warehouse,
                                                                   tmp_path: Path) -> None:
    prefix = unique("events")
    topics = [f"{prefix}.orders", f"{prefix}.Clicks", f"{prefix}.user-signups"]
    late = f"{prefix}.refunds"
    for topic in topics:
        create_topic(bootstrap, topic, 2)
    other = unique("other")  # matches no regex: never a table
    create_topic(bootstrap, other, 1)
    produce(bootstrap, other, [(None, b'{"id": 1}', 0)])
    namespace = "tt"
    tables = {t: topic_table(namespace, t) for t in [*topics, late]}
    assert tables[f"{prefix}.Clicks"] == f"tt.{prefix}_clicks" and tables[topics[2]] == f"tt.{prefix}_user_signups"
    interval_ms = 2000
    connector = {"name": unique("tabletopic"), "topics.regex": f"{prefix}\\..*",
                 "tabletopic.table-topic.enabled": "true", "tabletopic.table-topic.namespace": namespace,
                 f"iceberg.table.{tables[topics[0]]}.partition-by": "bucket(id, 4)",
                 "iceberg.control.commit.interval-ms": str(interval_ms), **warehouse.connector_props()}
    group = f"connect-{connector['name']}"
    daemon = DaemonProcess(tmp_path, worker_props(bootstrap, **{"value.converter.schemas.enable": "false"}),
                           [connector])
    sent: dict[str, int] = {t: 0 for t in tables}

    def send(topic: str, n: int) -> None:
        first = sent[topic]
        produce(bootstrap, topic, [(None, json.dumps({"id": first + i, "topic": topic}).encode(), i % 2)
                                   for i in range(n)])
        sent[topic] += n

    def committed(topic: str) -> int:
        """The topic's offsets as its own table records them (a snapshot records the connector's others too)."""
        return sum(o for (t, _), o in warehouse.offsets(tables[topic], group).items() if t == topic)

    for topic in topics:
        send(topic, 500)
    daemon.start()
    wait_until(lambda: all(committed(t) == 500 for t in topics), 120, "three tables", daemon)

    # A topic created while the daemon runs: its table within two intervals of the watch noticing it,
    # which lists topics once an interval (by construction, not timed here: the wait is generous).
    create_topic(bootstrap, late, 2)
    send(late, 300)
    wait_until(lambda: committed(late) == 300, 60, "the new topic's table", daemon)
    assert "new topics match topics.regex" in daemon.output()

    # Killed with records read but not committed; restarted, every table ends exact.
    for topic in [*topics, late]:
        send(topic, 400)
    time.sleep(interval_ms / 1000 / 2)
    daemon.kill()
    daemon.start()
    wait_until(lambda: all(committed(t) == sent[t] for t in tables), 120, "every table after the restart", daemon)
    assert daemon.terminate() == 0, daemon.output()[-3000:]

    for topic, table in tables.items():
        got = warehouse.sql(f"SELECT count(*), count(DISTINCT id), min(topic), max(topic) FROM {{c}}.{table}")[0]
        assert tuple(got) == (sent[topic], sent[topic], topic, topic), table
    spec = str(warehouse.table(tables[topics[0]]).spec())
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
