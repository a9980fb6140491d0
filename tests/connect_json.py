"""Connect's JSON with schemas: an envelope schema holding each of Connect's logical types, and its rows."""

from __future__ import annotations

import base64
import json
from typing import Any

ENVELOPE_SCHEMA = {"type": "struct", "optional": False, "fields": [
    {"field": "id", "type": "int64", "optional": False},
    {"field": "day", "type": "int32", "name": "org.apache.kafka.connect.data.Date", "optional": True},
    {"field": "at", "type": "int32", "name": "org.apache.kafka.connect.data.Time", "optional": True},
    {"field": "ts", "type": "int64", "name": "org.apache.kafka.connect.data.Timestamp", "optional": True},
    {"field": "price", "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "optional": True,
     "parameters": {"scale": "2", "connect.decimal.precision": "10"}},
    {"field": "blob", "type": "bytes", "optional": True},
    {"field": "tags", "type": "array", "items": {"type": "string"}, "optional": True},
    {"field": "attrs", "type": "map", "keys": {"type": "string"}, "values": {"type": "int32"}, "optional": True},
    {"field": "who", "type": "struct", "optional": True, "fields": [
        {"field": "name", "type": "string", "optional": True},
        {"field": "score", "type": "float64", "optional": True}]},
]}


def json_envelope(schema: dict[str, Any], payload: dict[str, Any]) -> bytes:
    """A record of JsonConverter with schemas.enable=true: the schema beside its payload."""
    return json.dumps({"schema": schema, "payload": payload}, separators=(",", ":")).encode()


def decimal_bytes(unscaled: int) -> str:
    return base64.b64encode(unscaled.to_bytes(4, "big", signed=True)).decode()


def typed_row(i: int, empty: bool = False) -> dict[str, Any]:
    """Row ``i`` of ENVELOPE_SCHEMA; ``empty``: every optional field null."""
    if empty:
        return {"id": i, "day": None, "at": None, "ts": None, "price": None, "blob": None, "tags": None,
                "attrs": None, "who": None}
    return {"id": i, "day": 19_000 + i, "at": 3_600_000 + i, "ts": 1_700_000_000_000 + i,
            "price": decimal_bytes(12_345 + i), "blob": base64.b64encode(bytes([i, 255])).decode(),
            "tags": [f"t{i}", "x"], "attrs": {"k": i}, "who": {"name": f"n{i}", "score": i / 2}}
