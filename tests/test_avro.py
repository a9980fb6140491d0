"""Avro through the sink: confluent-kafka's serializer, the built-in registry, tables made and evolved from schemas."""

from __future__ import annotations

import asyncio
import datetime
import decimal
import json
import struct
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka.schema_registry import SchemaRegistryClient

from tabletopic.demo.broker import free_port
from tabletopic.write.spark_session import SparkRuntime
from tests.avro_orders import AVRO, EVERY_TYPE, every, order, order_schema, serializer
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
    worker_props,
)


def _done(table: str, n: int) -> Callable[[Any], bool]:
    return lambda d: sum(d.connectors[0].task.committed_offsets(table).values()) >= n


def test_v1_v2_v3_from_the_registry_evolve_one_table(bootstrap: str, spark: SparkRuntime, warehouse: Warehouse) -> None:
    topic, table = unique("orders"), "avro.orders"
    create_topic(bootstrap, topic, 2)
    worker, url = registry_worker(bootstrap, AVRO)
    connector = connector_props("avro", topic, table, warehouse, {
        "iceberg.tables.auto-create-enabled": "true", "iceberg.tables.evolve-schema-enabled": "true",
        "iceberg.control.commit.interval-ms": "1000"})

    def send(version: int, ids: range) -> None:
        serialize = serializer(url, order_schema(version))  # registers the version, as producers do
        produce(bootstrap, topic, [(None, serialize(topic, order(version, i)), i % 2) for i in ids])

    versions: list[int] = []

    async def during(daemon: Any) -> None:
        for version, ids in ((1, range(0, 60)), (2, range(60, 120)), (3, range(120, 180))):
            await asyncio.to_thread(send, version, ids)
            await asyncio.sleep(1.5)  # let a commit land between versions, so the table evolves in place
        client = SchemaRegistryClient({"url": url})
        versions.extend(await asyncio.to_thread(client.get_versions, f"{topic}-value"))

    code, _ = run_in_process(spark, worker, [connector], until=_done(table, 180), during=during)
    assert code == 0
    rows = {r.id: r for r in warehouse.rows(table, "id, amount, customer, at, note")}
    assert sorted(rows) == list(range(180))
    assert rows[5].amount == 5 and rows[70].amount == 3_000_000_070
    assert rows[5].customer.name == "c5" and rows[5].customer.email is None and rows[5].note is None
    assert rows[70].customer.email == "c70@example.org" and rows[70].note is None
    assert rows[150].note == "n150" and rows[150].customer.email == "c150@example.org"
    java = warehouse.table(table)
    assert str(java.schema().findField("amount").type()) == "long"
    assert str(java.schema().findField("at").type()) == "timestamptz"
    assert java.schema().findField("customer.email").isOptional() and java.schema().findField("note").isOptional()
    live = {r[0] for r in warehouse.sql(f"SELECT file_path FROM {{c}}.{table}.files")}
    ever = {r[0] for r in warehouse.sql(f"SELECT file_path FROM {{c}}.{table}.all_data_files")}
    assert live == ever  # evolved without rewriting a data file
    duck = duckdb_connection().execute(
        "SELECT count(*), count(note), count(customer.email), sum(amount), min(\"at\") "
        f"FROM iceberg_scan('{warehouse.location(table)}')").fetchone()
    assert duck[:4] == (180, 60, 120, sum(range(60)) + sum(3_000_000_000 + i for i in range(60, 180)))
    assert duck[4] == datetime.datetime(2026, 11, 1, tzinfo=datetime.timezone.utc)
    assert versions == [1, 2, 3]


def ship_schema(version: int) -> dict[str, Any]:
    ship: list[dict[str, Any]] = [{"name": "city", "type": "string"}]
    if version >= 3:
        ship.append({"name": "zip", "type": ["null", "string"], "default": None})
    fields: list[dict[str, Any]] = [{"name": "id", "type": "long"}]
    if version >= 2:
        fields += [{"name": "ship", "type": ["null", {"type": "record", "name": "Ship", "fields": ship}],
                    "default": None},
                   {"name": "tags", "type": ["null", {"type": "array", "items": "string"}], "default": None},
                   {"name": "attrs", "type": ["null", {"type": "map", "values": "long"}], "default": None}]
    return {"type": "record", "name": "Parcel", "namespace": "shop", "fields": fields}


def parcel(version: int, i: int) -> dict[str, Any]:
    if version == 1:
        return {"id": i}
    ship = {"city": f"c{i}", **({"zip": f"z{i}"} if version >= 3 else {})}
    return {"id": i, "ship": ship, "tags": [f"t{i}"], "attrs": {"k": i}}


def test_new_struct_list_and_map_columns_then_a_field_inside_the_new_struct(
        bootstrap: str, spark: SparkRuntime, warehouse: Warehouse) -> None:
    topic, table = unique("parcels"), "avro.parcels"
    create_topic(bootstrap, topic, 1)
    worker, url = registry_worker(bootstrap, AVRO)
    connector = connector_props("avro", topic, table, warehouse, {
        "iceberg.tables.auto-create-enabled": "true", "iceberg.tables.evolve-schema-enabled": "true",
        "errors.tolerance": "all", "iceberg.control.commit.interval-ms": "1000"})

    async def during(daemon: Any) -> None:
        for version, ids in ((1, range(0, 60)), (2, range(60, 120)), (3, range(120, 180))):
            serialize = serializer(url, ship_schema(version))
            await asyncio.to_thread(produce, bootstrap, topic,
                                    [(None, serialize(topic, parcel(version, i)), 0) for i in ids])
            await asyncio.sleep(1.5)  # a commit between versions: the table evolves in place

    code, _ = run_in_process(spark, worker, [connector], until=_done(table, 180), during=during)
    assert code == 0
    rows = {r.id: r for r in warehouse.rows(table, "id, ship, tags, attrs")}
    assert sorted(rows) == list(range(180))
    assert rows[5].ship is None and rows[5].tags is None and rows[5].attrs is None
    assert rows[70].ship.city == "c70" and rows[70].ship.zip is None
    assert rows[70].tags == ["t70"] and rows[70].attrs == {"k": 70}
    assert rows[150].ship.zip == "z150"
    schema = warehouse.table(table).schema()
    assert str(schema.findField("attrs").type()) == "map<string, long>"
    assert schema.findField("ship.zip").isOptional()
    duck = duckdb_connection().execute(
        "SELECT count(*), count(ship), count(ship.zip), count(tags), sum(attrs['k']) "
        f"FROM iceberg_scan('{warehouse.location(table)}')").fetchone()
    assert duck == (180, 120, 60, 120, sum(range(60, 180)))


def test_every_avro_type_lands_in_its_iceberg_type(bootstrap: str, spark: SparkRuntime, warehouse: Warehouse) -> None:
    topic, table = unique("every"), "avro.every"
    create_topic(bootstrap, topic, 1)
    worker, url = registry_worker(bootstrap, AVRO)
    connector = connector_props("every", topic, table, warehouse, {
        "iceberg.tables.auto-create-enabled": "true", "iceberg.control.commit.interval-ms": "1000"})

    async def during(daemon: Any) -> None:
        serialize = serializer(url, EVERY_TYPE)
        await asyncio.to_thread(produce, bootstrap, topic, [(None, serialize(topic, every(i)), 0) for i in range(3)])

    code, _ = run_in_process(spark, worker, [connector], until=_done(table, 3), during=during)
    assert code == 0
    types = {f.name(): str(f.type()) for f in warehouse.table(table).schema().columns()}
    assert types["i"] == "int" and types["f"] == "float" and types["b"] == "binary" and types["color"] == "string"
    assert types["dec"] == "decimal(10, 2)" and types["fdec"] == "decimal(12, 3)" and types["day"] == "date"
    assert types["tms"] == "long" and types["tsm"] == "timestamptz" and types["local"] == "timestamp"
    assert types["attrs"] == "map<string, long>" and types["either"].startswith("struct<")
    assert warehouse.table(table).schema().findField("maybe").isOptional()
    assert warehouse.table(table).schema().findField("id").isRequired()
    rows = {r.id: r.asDict(recursive=True) for r in warehouse.rows(table)}
    one = rows[1]
    assert one["flag"] is False and one["i"] == -1 and one["f"] == 1.5 and one["d"] == 0.25 and one["s"] == "s1"
    assert one["b"] == bytes([1, 255]) and one["maybe"] is None and rows[2]["maybe"] == "m2"
    assert one["color"] == "GREEN" and one["four"] == b"abcd"
    assert one["dec"] == decimal.Decimal("1.25") and one["fdec"] == decimal.Decimal("-12.345")
    assert one["day"] == datetime.date(2026, 1, 2)
    assert one["tms"] == ((1 * 60 + 2) * 60 + 3) * 1_000_000 + 4000 and one["tus"] == 86_400_000_000 - 1
    utc = datetime.timezone.utc
    assert one["tsm"].astimezone(utc) == datetime.datetime(2026, 5, 6, 7, 8, 9, 10_000, utc)
    assert one["tsu"].astimezone(utc) == datetime.datetime(2026, 5, 6, 7, 8, 9, 123_456, utc)
    assert one["local"] == datetime.datetime(2026, 5, 6, 7, 8, 9, 123_456)
    assert one["uid"] == str(uuid.UUID(int=1))
    assert one["tags"] == ["t1", "x"] and one["attrs"] == {"k": 1}
    assert one["inner"] == {"x": 1, "shade": "RED", "when": None}
    assert one["inners"] == [{"x": 1, "shade": "GREEN", "when": datetime.date(2026, 2, 2)}]
    assert one["either"] == {"long": 1, "string": None} and rows[2]["either"] == {"long": None, "string": "e2"}


def test_poison_records_among_ten_thousand_good_ones(bootstrap: str, spark: SparkRuntime,
                                                     warehouse: Warehouse) -> None:
    topic, dlq, table = unique("avro_poison"), unique("avro_dlq"), "avro.poison"
    create_topic(bootstrap, topic, 2)
    create_topic(bootstrap, dlq, 1)
    worker, url = registry_worker(bootstrap, AVRO)
    schema = {"type": "record", "name": "Reading", "fields": [
        {"name": "id", "type": "long"}, {"name": "value", "type": "double"},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}
    good_total = 10_000
    bad_values: list[bytes] = []
    connector = connector_props("avro_poison", topic, table, warehouse, {
        "iceberg.tables.auto-create-enabled": "true", "iceberg.control.commit.interval-ms": "1000"})
    group = f"connect-{connector['name']}"

    async def during(daemon: Any) -> None:
        serialize = serializer(url, schema)
        good = [serialize(topic, {"id": i, "value": i / 2, "at": 1_790_000_000_000 + i}) for i in range(good_total)]
        schema_id = struct.unpack(">I", good[0][1:5])[0]
        bad_values.extend([
            b"\xde\xad\xbe\xef garbage",                                # no wire format at all
            b"\x00" + struct.pack(">I", schema_id + 1000) + good[0][5:],  # a schema id no one registered
            good[1][:7],                                                 # a body cut short
            json.dumps({"id": 1, "value": "not a double"}).encode(),     # JSON written into an Avro topic
            # Valid Avro whose timestamp no table can hold: it alone fails, not its schema's whole batch.
            serialize(topic, {"id": -1, "value": 0.0, "at": 2**62}),
        ])
        records = [(None, v, i % 2) for i, v in enumerate(good)]
        for n, bad in enumerate(bad_values):  # spread over both partitions, between good records
            records.insert(1000 + n * 2500, (b"poison", bad, n % 2))
        await asyncio.to_thread(produce, bootstrap, topic, records)

    # errors.tolerance=none: the sink stops at the first bad record and commits nothing past it.
    code, daemon = run_in_process(spark, worker, [connector], during=during,
                                  until=lambda d: d.connectors[0].consumer.fatal is not None)
    assert code == 1
    message = str(daemon.connectors[0].consumer.fatal)
    assert f"record {topic}[" in message and "failed in convert" in message and "errors.tolerance=all" in message
    failed = daemon.connectors[0].consumer.fatal
    committed = warehouse.offsets(table, group) if warehouse.exists(table) else {}
    assert committed.get((failed.topic, failed.partition), 0) <= failed.offset

    # The operator lets it skip: tolerance=all, with a dead-letter topic so no record is lost.
    connector.update({"errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq,
                      "errors.deadletterqueue.context.headers.enable": "true"})
    total = good_total + len(bad_values)
    code, daemon = run_in_process(spark, worker, [connector], until=_done(table, total))
    assert code == 0
    got = warehouse.sql(f"SELECT count(*), count(DISTINCT id), sum(value) FROM {{c}}.{table}")[0]
    assert tuple(got) == (good_total, good_total, sum(i / 2 for i in range(good_total)))
    dead = read_topic(bootstrap, dlq, len(bad_values))
    assert sorted(v for v, _ in dead) == sorted(bad_values)
    for _, headers in dead:
        assert headers["__connect.errors.topic"] == topic.encode()
        assert headers["__connect.errors.stage"] == b"VALUE_CONVERTER"
        assert headers["__connect.errors.exception.message"]
        assert int(headers["__connect.errors.offset"]) >= 0 and headers["__connect.errors.partition"] in (b"0", b"1")
    reasons = {v: h["__connect.errors.exception.message"].decode() for v, h in dead}
    assert "magic byte" in reasons[bad_values[0]] and "not in the Schema Registry" in reasons[bad_values[1]]
    assert "does not decode" in reasons[bad_values[2]]


def test_a_registry_unreachable_for_too_long_stops_the_connector_without_moving_offsets(
        bootstrap: str, spark: SparkRuntime, warehouse: Warehouse) -> None:
    """Retried first (test_outages shows the recovery); after max-consecutive-failures, exit 1."""
    topic, table = unique("noregistry"), "avro.noregistry"
    create_topic(bootstrap, topic, 1)
    produce(bootstrap, topic, [(None, b"\x00\x00\x00\x00\x01\x02", 0)])
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    connector = connector_props("noregistry", topic, table, warehouse, {
        "iceberg.tables.auto-create-enabled": "true", "value.converter": AVRO,
        "value.converter.schema.registry.url": url, "errors.tolerance": "all",
        "tabletopic.catalog.max-consecutive-failures": "2", "iceberg.control.commit.interval-ms": "1000"})
    code, daemon = run_in_process(spark, worker_props(bootstrap), [connector],
                                  until=lambda d: d.connectors[0].consumer.fatal is not None)
    assert code == 1
    message = str(daemon.connectors[0].consumer.fatal)
    assert url in message and "not reachable" in message and "2 failures in a row" in message
    assert not warehouse.exists(table)  # not a bad record: nothing was skipped or committed
