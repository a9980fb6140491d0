"""Avro orders in three schema versions, serialized as Confluent's serializer does against a registry."""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from typing import Any

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

AVRO = "io.confluent.connect.avro.AvroConverter"


def serializer(url: str, schema: dict[str, Any]) -> Callable[[str, dict[str, Any]], bytes]:
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
