"""Avro test data: orders in three schema versions, a record of every Avro type, and Confluent's serializer."""

from __future__ import annotations

import datetime
import decimal
import json
import uuid
from collections.abc import Callable
from typing import Any

AVRO = "io.confluent.connect.avro.AvroConverter"


def serializer(url: str, schema: dict[str, Any]) -> Callable[[str, dict[str, Any]], bytes]:
    # Here, not at the top: the unit tests that take the schemas below need no client (half a second to import).
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    serializer = AvroSerializer(SchemaRegistryClient({"url": url}), json.dumps(schema))
    return lambda topic, value: serializer(value, SerializationContext(topic, MessageField.VALUE))  # type: ignore


def order_schema(version: int) -> dict[str, Any]:
    customer: list[dict[str, Any]] = [{"name": "name", "type": "string"}]
    if version >= 2:
        customer.append({"name": "email", "type": ["null", "string"], "default": None})
    fields: list[dict[str, Any]] = [
        {"name": "id", "type": "long"},
        {"name": "amount", "type": "int" if version == 1 else "long"},
        {"name": "customer", "type": {"type": "record", "name": "Customer", "fields": customer}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}}]
    if version >= 3:
        fields.append({"name": "note", "type": ["null", "string"], "default": None})
    return {"type": "record", "name": "Order", "namespace": "shop", "fields": fields}


def order(version: int, i: int) -> dict[str, Any]:
    customer: dict[str, Any] = {"name": f"c{i}"}
    if version >= 2:
        customer["email"] = f"c{i}@example.org"
    value: dict[str, Any] = {"id": i, "amount": i if version == 1 else 3_000_000_000 + i, "customer": customer,
                             "at": datetime.datetime(2026, 11, 1, tzinfo=datetime.timezone.utc)
                             + datetime.timedelta(seconds=i)}
    if version >= 3:
        value["note"] = f"n{i}"
    return value


EVERY_TYPE: dict[str, Any] = {"type": "record", "name": "Everything", "namespace": "t", "fields": [
    {"name": "id", "type": "long"},
    {"name": "flag", "type": "boolean"},
    {"name": "i", "type": "int"},
    {"name": "f", "type": "float"},
    {"name": "d", "type": "double"},
    {"name": "s", "type": "string"},
    {"name": "b", "type": "bytes"},
    {"name": "maybe", "type": ["null", "string"], "default": None},
    {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}},
    {"name": "four", "type": {"type": "fixed", "name": "Four", "size": 4}},
    {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
    {"name": "fdec", "type": {"type": "fixed", "name": "F8", "size": 8, "logicalType": "decimal",
                              "precision": 12, "scale": 3}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "tms", "type": {"type": "int", "logicalType": "time-millis"}},
    {"name": "tus", "type": {"type": "long", "logicalType": "time-micros"}},
    {"name": "tsm", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "tsu", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
    {"name": "uid", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "attrs", "type": {"type": "map", "values": "long"}},
    {"name": "inner", "type": {"type": "record", "name": "Inner", "fields": [
        {"name": "x", "type": "int"}, {"name": "shade", "type": "Color"},
        {"name": "when", "type": ["null", {"type": "int", "logicalType": "date"}], "default": None}]}},
    {"name": "inners", "type": {"type": "array", "items": "Inner"}},
    {"name": "either", "type": ["null", "long", "string"], "default": None},
]}


def every(i: int) -> dict[str, Any]:
    utc = datetime.timezone.utc
    return {"id": i, "flag": i % 2 == 0, "i": -i, "f": 1.5, "d": i / 4, "s": f"s{i}", "b": bytes([i, 255]),
            "maybe": None if i % 2 else f"m{i}", "color": "GREEN", "four": b"abcd",
            "dec": decimal.Decimal(f"{i}.25"), "fdec": decimal.Decimal("-12.345"),
            "day": datetime.date(2026, 1, 1 + i), "tms": datetime.time(1, 2, 3, 4000),
            "tus": datetime.time(23, 59, 59, 999_999), "tsm": datetime.datetime(2026, 5, 6, 7, 8, 9, 10_000, utc),
            "tsu": datetime.datetime(2026, 5, 6, 7, 8, 9, 123_456, utc),
            "local": datetime.datetime(2026, 5, 6, 7, 8, 9, 123_456), "uid": uuid.UUID(int=i),
            "tags": [f"t{i}", "x"], "attrs": {"k": i}, "inner": {"x": i, "shade": "RED", "when": None},
            "inners": [{"x": 1, "shade": "GREEN", "when": datetime.date(2026, 2, 2)}],
            "either": i if i % 2 else f"e{i}"}
