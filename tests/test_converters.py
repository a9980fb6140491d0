"""Converters end to end: records through the broker, rows read back from the tables."""

from __future__ import annotations

import asyncio
import datetime as dt
import decimal
import json
from pathlib import Path

import aiohttp

from tabletopic.write.spark_session import SparkRuntime
from tests.connect_json import ENVELOPE_SCHEMA, json_envelope, typed_row
from tests.support import (
    Warehouse,
    connector_props,
    create_topic,
    produce,
    run_in_process,
    unique,
    worker_props,
)


def _committed(daemon: object, table: str, n: int) -> bool:
    task = daemon.connectors[0].task  # type: ignore[attr-defined]
    return sum(task.committed_offsets(table).values()) >= n


def test_connect_json_logical_types_and_nesting(bootstrap: str, spark: SparkRuntime, warehouse: Warehouse) -> None:
    topic = unique("typed")
    create_topic(bootstrap, topic, 2)
    rows = [typed_row(i) for i in range(40)] + [typed_row(99, empty=True)]
    produce(bootstrap, topic, [(None, json_envelope(ENVELOPE_SCHEMA, r), r["id"] % 2) for r in rows])
    table = "typed.records"
    code, _ = run_in_process(spark, worker_props(bootstrap), [connector_props("typed", topic, table, warehouse, {
        "value.converter.schemas.enable": "true", "iceberg.tables.auto-create-enabled": "true",
        "iceberg.control.commit.interval-ms": "1000"})],
        until=lambda d: _committed(d, table, len(rows)))
    assert code == 0
    got = {r.id: r for r in warehouse.rows(table)}
    assert len(got) == len(rows)
    first = got[3]
    assert first.day == dt.date(1970, 1, 1) + dt.timedelta(days=19_003)
    assert first.at == (3_600_000 + 3) * 1000  # microseconds since midnight
    micros = warehouse.sql(f"SELECT unix_micros(ts) FROM {{c}}.{table} WHERE id = 3")[0][0]
    assert micros == (1_700_000_000_000 + 3) * 1000
    assert first.price == decimal.Decimal("123.48")
    assert bytes(first.blob) == bytes([3, 255])
    assert first.tags == ["t3", "x"]
    assert first.attrs == {"k": 3}
    assert first.who.name == "n3" and first.who.score == 1.5
    assert got[99].price is None and got[99].who is None
    columns = {f.name: f.dataType.simpleString() for f in spark.session.table(f"{warehouse.catalog}.{table}").schema}
    assert columns["price"] == "decimal(10,2)" and columns["day"] == "date" and columns["ts"] == "timestamp"
    assert columns["id"] == "bigint" and columns["attrs"] == "map<string,int>"
    assert not spark.session.table(f"{warehouse.catalog}.{table}").schema["id"].nullable  # optional: false


def test_string_and_bytearray_converters_in_one_process(bootstrap: str, spark: SparkRuntime,
                                                         warehouse: Warehouse, tmp_path: Path) -> None:
    text_topic, bytes_topic = unique("text"), unique("bytes")
    create_topic(bootstrap, text_topic, 1)
    create_topic(bootstrap, bytes_topic, 1)
    produce(bootstrap, text_topic, [(None, f"line {i} é".encode(), 0) for i in range(25)])
    produce(bootstrap, bytes_topic, [(None, bytes([i, 0, 200]), 0) for i in range(25)])
    scraped: dict[str, object] = {}

    async def scrape(daemon: object) -> None:
        port = daemon.http.port  # type: ignore[attr-defined]
        async with aiohttp.ClientSession() as http:
            # The connectors own their partitions a moment before start-up is over: /ready says 503
            # ("starting connectors") until it is, and must then say 200.
            for _ in range(100):
                async with http.get(f"http://127.0.0.1:{port}/ready") as response:
                    if response.status == 200:
                        break
                await asyncio.sleep(0.3)
            for path in ("/health", "/ready", "/connectors", "/metrics"):
                async with http.get(f"http://127.0.0.1:{port}{path}") as response:
                    scraped[path] = (response.status, await response.text())

    connectors = [
        connector_props("text", text_topic, "raw.text", warehouse, {
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "iceberg.tables.auto-create-enabled": "true", "iceberg.control.commit.interval-ms": "1000"}),
        connector_props("bytes", bytes_topic, "raw.bytes", warehouse, {
            "value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
            "iceberg.tables.auto-create-enabled": "true", "iceberg.control.commit.interval-ms": "1000"}),
    ]

    def done(daemon: object) -> bool:
        tasks = [c.task for c in daemon.connectors]  # type: ignore[attr-defined]
        return all(sum(t.committed_offsets(name).values()) >= 25
                   for t, name in zip(tasks, ["raw.text", "raw.bytes"], strict=True))

    code, _ = run_in_process(spark, worker_props(bootstrap, listeners="http://127.0.0.1:0"), connectors,
                             until=done, during=scrape)
    assert code == 0
    assert sorted(r.value for r in warehouse.rows("raw.text")) == sorted(f"line {i} é" for i in range(25))
    assert sorted(bytes(r.value) for r in warehouse.rows("raw.bytes")) == sorted(bytes([i, 0, 200]) for i in range(25))
    assert scraped["/health"][0] == 200
    assert scraped["/ready"][0] == 200, scraped["/ready"]
    assert sorted(json.loads(scraped["/connectors"][1])) == sorted(c["name"] for c in connectors)
    metrics = scraped["/metrics"][1]
    assert "tabletopic_records_consumed_total" in metrics and "tabletopic_jvm_memory_bytes" in metrics
