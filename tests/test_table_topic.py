"""Table Topic mode: one connector, a topics.regex, each topic its own table, new topics picked up, SIGKILL-safe."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tabletopic.route.router import topic_table
from tests.support import DaemonProcess, Warehouse, create_topic, produce, unique, wait_until, worker_props


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
