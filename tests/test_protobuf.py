"""Protobuf through the sink: confluent-kafka's serializer, the built-in registry, one table over three versions."""

from __future__ import annotations

import asyncio
import datetime
import functools
from collections.abc import Callable
from typing import Any

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import message_factory

from tabletopic.registry.protobuf_schema import parse
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

PROTOBUF = "io.confluent.connect.protobuf.ProtobufConverter"
AT = datetime.datetime(2026, 11, 1, tzinfo=datetime.timezone.utc)


def order_proto(version: int) -> str:
    customer = "string name = 1;" + (" optional string email = 2;" if version >= 2 else "")
    more = ""
    if version >= 2:
        more += " int64 qty = 9;"
    if version >= 3:
        more += " Address ship = 10; Status status = 11;"
    extra_types = "\nmessage Address { string city = 1; int32 zip = 2; }\nenum Status { NEW = 0; PAID = 1; }" \
        if version >= 3 else ""
    return f"""syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
message Order {{
  int64 id = 1;
  Customer customer = 2;
  repeated string lines = 3;
  map<string, int64> tags = 4;
  oneof pay {{ string card = 5; int64 cash = 6; }}
  google.protobuf.Timestamp at = 7;
  int32 amount = 8;{more}
}}
message Customer {{ {customer} }}{extra_types}
"""


@functools.cache
def order_class(version: int) -> Any:
    """A message class built from the .proto text at run time, as protoc-generated code would give it."""
    schema = parse(order_proto(version), [])
    return message_factory.GetMessageClass(schema.pool().FindMessageTypeByName("shop.Order"))


def order(cls: Any, version: int, i: int) -> Any:
    m = cls(id=i, amount=i, lines=[f"l{i}", "x"], tags={"a": i})
    m.customer.name = f"c{i}"
    if i % 2:
        m.card = f"card{i}"
    else:
        m.cash = i * 10
    m.at.FromDatetime(AT + datetime.timedelta(seconds=i))
    if version >= 2:
        m.qty = 1_000 + i
        if i % 3 == 0:
            m.customer.email = f"c{i}@example.org"
    if version >= 3:
        m.ship.city = f"city{i}"
        m.ship.zip = i
        m.status = 1
    return m


def _serializer(url: str, cls: Any) -> Callable[[str, Any], bytes]:
    serializer = ProtobufSerializer(cls, SchemaRegistryClient({"url": url}), {"use.deprecated.format": False})
    return lambda topic, value: serializer(value, SerializationContext(topic, MessageField.VALUE))  # type: ignore


def test_v1_v2_v3_protobuf_from_the_registry_evolve_one_table(bootstrap: str, spark: SparkRuntime,
                                                               warehouse: Warehouse) -> None:
    topic, table = unique("pb_orders"), "pb.orders"
    create_topic(bootstrap, topic, 2)
    worker, url = registry_worker(bootstrap, PROTOBUF)
    connector = connector_props("pb", topic, table, warehouse, {
        "iceberg.tables.auto-create-enabled": "true", "iceberg.tables.evolve-schema-enabled": "true",
        "iceberg.control.commit.interval-ms": "1000"})
    dlq = unique("pb_dlq")
    create_topic(bootstrap, dlq, 1)
    connector.update({"errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq,
                      "errors.deadletterqueue.context.headers.enable": "true"})
    bad: list[bytes] = []

    def send(version: int, ids: range) -> None:
        cls = order_class(version)
        serialize = _serializer(url, cls)  # registers the version, as producers do
        produce(bootstrap, topic, [(None, serialize(topic, order(cls, version, i)), i % 2) for i in ids])

    versions: list[int] = []

    async def during(daemon: Any) -> None:
        for version, ids in ((1, range(0, 60)), (2, range(60, 120)), (3, range(120, 180))):
            await asyncio.to_thread(send, version, ids)
            await asyncio.sleep(1.5)  # a commit between versions, so the table evolves in place
            if version == 1:  # between good records of both partitions: version 1's id, a body cut short
                good = _serializer(url, order_class(1))(topic, order(order_class(1), 1, 0))
                bad.extend([good[:-3], b"\x00" + good[1:5] + b"\x02\x0e" + good[6:]])  # the 2nd: message [7], not there
                await asyncio.to_thread(produce, bootstrap, topic, [(None, bad[0], 0), (None, bad[1], 1)])
        client = SchemaRegistryClient({"url": url})
        versions.extend(await asyncio.to_thread(client.get_versions, f"{topic}-value"))

    def done(d: Any) -> bool:
        return sum(d.connectors[0].task.committed_offsets(table).values()) >= 182

    code, _ = run_in_process(spark, worker, [connector], until=done, during=during)
    assert code == 0
    assert versions == [1, 2, 3]
    dead = read_topic(bootstrap, dlq, 2)
    reasons = {v: h["__connect.errors.exception.message"].decode() for v, h in dead}
    assert "does not decode" in reasons[bad[0]] and "message [7]" in reasons[bad[1]], reasons
    rows = {r.id: r for r in warehouse.rows(table, "id, amount, customer, lines, tags, pay, at, qty, ship, status")}
    assert sorted(rows) == list(range(180))  # the bad record is not a row
    r5, r60, r150 = rows[5], rows[60], rows[150]
    assert (r5.customer.name, r5.customer.email, r5.qty, r5.ship, r5.status) == ("c5", None, None, None, None)
    assert list(r5.lines) == ["l5", "x"] and dict(r5.tags) == {"a": 5}
    assert (r5.pay.card, r5.pay.cash) == ("card5", None) and (r60.pay.card, r60.pay.cash) == (None, 600)
    assert r5.at == AT.replace(tzinfo=None) + datetime.timedelta(seconds=5) or \
        r5.at == AT + datetime.timedelta(seconds=5)
    assert (r60.customer.email, r60.qty) == ("c60@example.org", 1_060)
    assert (r150.ship.city, r150.ship.zip, r150.status, r150.qty) == ("city150", 150, "PAID", 1_150)
    java = warehouse.table(table)
    assert str(java.schema().findField("at").type()) == "timestamptz"
    assert str(java.schema().findField("tags").type()) == "map<string, long>"
    duck = duckdb_connection().execute(
        "SELECT count(*), count(qty), count(ship.city), count(customer.email), sum(amount), min(\"at\"), "
        f"count(pay.card) FROM iceberg_scan('{warehouse.location(table)}')").fetchone()
    assert duck[:5] == (180, 120, 60, 40, sum(range(180)))
    assert duck[5] == AT and duck[6] == 90
