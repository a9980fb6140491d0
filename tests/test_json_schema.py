"""JSON Schema through the sink: confluent-kafka's serializer, the built-in registry, one table over three versions."""

from __future__ import annotations

import asyncio
import datetime
import json
from typing import Any

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tabletopic.write.spark_session import SparkRuntime
from tests.support import (
    Warehouse,
    connector_props,
    create_topic,
    duckdb_connection,
    produce,
    read_topic,
    registry_worker,
    run_in_process,
    unique,
)

JSON_SCHEMA = "io.confluent.connect.json.JsonSchemaConverter"
AT = datetime.datetime(2026, 11, 1, tzinfo=datetime.timezone.utc)


def order_schema(version: int) -> dict[str, Any]:
    # Closed objects (additionalProperties false): under Confluent's rules only they may gain optional
    # properties, since an open one already allowed anything under the new name.
    customer: dict[str, Any] = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"],
                                "additionalProperties": False}
    if version >= 2:
        customer["properties"]["email"] = {"oneOf": [{"type": "null"}, {"type": "string"}]}
    props: dict[str, Any] = {
        "id": {"type": "integer"},
        "customer": {"$ref": "#/definitions/Customer"},
        "lines": {"type": "array", "items": {"type": "string"}},
        "tags": {"type": "object", "additionalProperties": {"type": "integer"}},
        "pay": {"oneOf": [{"type": "null"}, {"type": "object", "properties": {
            "card": {"type": ["null", "string"]}, "cash": {"type": ["null", "integer"]}}}]},
        "amount": {"type": "integer", "connect.type": "int32"},
        "at": {"type": "string", "format": "date-time"},
        "paid_ms": {"type": "integer", "title": "org.apache.kafka.connect.data.Timestamp", "connect.type": "int64"},
    }
    if version >= 2:
        props["qty"] = {"type": ["null", "integer"]}
    if version >= 3:
        props["ship"] = {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "integer"}}}
        props["extra"] = {"type": "object"}  # free-form: kept as its JSON text
    return {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
            "properties": props, "required": ["id"], "additionalProperties": False,
            "definitions": {"Customer": customer}}


def order(version: int, i: int) -> dict[str, Any]:
    value: dict[str, Any] = {"id": i, "amount": i, "customer": {"name": f"c{i}"}, "lines": [f"l{i}", "x"],
                             "tags": {"a": i}, "pay": {"card": f"card{i}"} if i % 2 else {"cash": i * 10},
                             "at": (AT + datetime.timedelta(seconds=i)).isoformat().replace("+00:00", "Z"),
                             "paid_ms": int((AT + datetime.timedelta(seconds=i)).timestamp() * 1000) + 250}
    if version >= 2:
        value["qty"] = 1_000 + i
        if i % 3 == 0:
            value["customer"]["email"] = f"c{i}@example.org"
    if version >= 3:
        value["ship"] = {"city": f"city{i}", "zip": i}
        value["extra"] = {"k": [i]}
    return value


def test_v1_v2_v3_json_schema_from_the_registry_evolve_one_table(bootstrap: str, spark: SparkRuntime,
                                                                  warehouse: Warehouse) -> None:
    topic, table, dlq = unique("js_orders"), "js.orders", unique("js_dlq")
    create_topic(bootstrap, topic, 2)
    create_topic(bootstrap, dlq, 1)
    worker, url = registry_worker(bootstrap, JSON_SCHEMA)
    connector = connector_props("js", topic, table, warehouse, {
        "iceberg.tables.auto-create-enabled": "true", "iceberg.tables.evolve-schema-enabled": "true",
        "iceberg.control.commit.interval-ms": "1000", "errors.tolerance": "all",
        "errors.deadletterqueue.topic.name": dlq})
    bad: list[bytes] = []

    def serializer(version: int) -> Any:
        s = JSONSerializer(json.dumps(order_schema(version)), SchemaRegistryClient({"url": url}))
        return lambda value: s(value, SerializationContext(topic, MessageField.VALUE))

    def send(version: int, ids: range) -> None:
        serialize = serializer(version)  # registers the version, as producers do
        produce(bootstrap, topic, [(None, serialize(order(version, i)), i % 2) for i in ids])

    versions: list[int] = []

    async def during(daemon: Any) -> None:
        for version, ids in ((1, range(0, 60)), (2, range(60, 120)), (3, range(120, 180))):
            await asyncio.to_thread(send, version, ids)
            await asyncio.sleep(1.5)  # a commit between versions, so the table evolves in place
            if version == 1:  # between good records of both partitions
                good = serializer(1)(order(1, 0))
                bad.extend([good[:5] + b'{"id": "not a number"}', good[:5] + b'{"id": 1, '])
                await asyncio.to_thread(produce, bootstrap, topic, [(None, bad[0], 0), (None, bad[1], 1)])
                # Dead-lettered, then a round or two with nothing else: rounds that take records and give
                # no table a row. The next records must follow them without being read twice (they were
                # refused as a gap once, and the bad records dead-lettered again).
                await asyncio.to_thread(read_topic, bootstrap, dlq, 2)
                await asyncio.sleep(2.5)
        client = SchemaRegistryClient({"url": url})
        versions.extend(await asyncio.to_thread(client.get_versions, f"{topic}-value"))

    def done(d: Any) -> bool:
        return sum(d.connectors[0].task.committed_offsets(table).values()) >= 182

    code, _ = run_in_process(spark, worker, [connector], until=done, during=during)
    assert code == 0
    assert versions == [1, 2, 3]
    dead = read_topic(bootstrap, dlq, 2)
    assert sorted(v for v, _ in dead) == sorted(bad)
    rows = {r.id: r for r in warehouse.rows(table, "id, amount, customer, lines, tags, pay, qty, ship, extra")}
    java = warehouse.table(table)
    assert str(java.schema().findField("at").type()) == "timestamptz"
    assert str(java.schema().findField("paid_ms").type()) == "timestamptz"
    assert sorted(rows) == list(range(180))
    r5, r60, r150 = rows[5], rows[60], rows[150]
    assert (r5.customer.name, r5.customer.email, r5.qty, r5.ship, r5.extra) == ("c5", None, None, None, None)
    assert list(r5.lines) == ["l5", "x"] and dict(r5.tags) == {"a": 5}
    assert (r5.pay.card, r5.pay.cash) == ("card5", None) and (r60.pay.card, r60.pay.cash) == (None, 600)
    assert (r60.customer.email, r60.qty) == ("c60@example.org", 1_060)
    assert (r150.ship.city, r150.ship.zip, json.loads(r150.extra)) == ("city150", 150, {"k": [150]})
    assert str(java.schema().findField("amount").type()) == "int"
    assert str(java.schema().findField("tags").type()) == "map<string, long>"
    duck = duckdb_connection().execute(
        "SELECT count(*), count(qty), count(ship.city), count(customer.email), sum(amount), count(pay.card), "
        f"min(\"at\"), max(paid_ms) FROM iceberg_scan('{warehouse.location(table)}')").fetchone()
    assert duck[:6] == (180, 120, 60, 40, sum(range(180)), 90)
    assert duck[6] == AT and duck[7] == AT + datetime.timedelta(seconds=179, milliseconds=250)


PAYMENT_SCHEMA = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Payment", "type": "object",
                  "properties": {"id": {"type": "integer"}, "payment": {"oneOf": [
                      {"type": "object", "properties": {"card": {"type": "string"}}, "required": ["card"],
                       "additionalProperties": False},
                      {"type": "object", "properties": {"iban": {"type": "string"}}, "required": ["iban"],
                       "additionalProperties": False}]}},
                  "required": ["id", "payment"]}


def test_a_oneof_of_tagged_objects_is_a_struct_readers_query_by_field(bootstrap: str, spark: SparkRuntime,
                                                                        warehouse: Warehouse) -> None:
    topic, table = unique("js_pay"), "js.payments"
    create_topic(bootstrap, topic, 2)
    worker, url = registry_worker(bootstrap, JSON_SCHEMA)
    connector = connector_props("js_pay", topic, table, warehouse, {
        "iceberg.tables.auto-create-enabled": "true", "iceberg.control.commit.interval-ms": "1000"})

    async def during(daemon: Any) -> None:
        def send() -> None:
            s = JSONSerializer(json.dumps(PAYMENT_SCHEMA), SchemaRegistryClient({"url": url}))
            values = [{"id": i, "payment": {"card": f"4111-{i}"} if i % 2 else {"iban": f"FR76-{i}"}}
                      for i in range(3000)]
            produce(bootstrap, topic, [(None, s(v, SerializationContext(topic, MessageField.VALUE)), i % 2)
                                       for i, v in enumerate(values)])
        await asyncio.to_thread(send)

    code, _ = run_in_process(spark, worker, [connector], during=during,
                             until=lambda d: sum(d.connectors[0].task.committed_offsets(table).values()) >= 3000)
    assert code == 0
    spark_counts = warehouse.sql(f"SELECT count(*), count(payment.card), count(payment.iban), "
                                 f"max(payment.card) FROM {{c}}.{table}")[0]
    assert tuple(spark_counts) == (3000, 1500, 1500, "4111-999")
    duck = duckdb_connection().execute(
        "SELECT count(*), count(payment.card), count(payment.iban), min(payment.iban) "
        f"FROM iceberg_scan('{warehouse.location(table)}')").fetchone()
    assert duck == (3000, 1500, 1500, "FR76-0")
