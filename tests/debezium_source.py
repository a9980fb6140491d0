"""A Debezium-like source database (MySQL's envelope, JSON with schemas): its change events and its rows."""

from __future__ import annotations

from typing import Any

from tests.connect_json import json_envelope

COLUMNS = {
    "customers": [{"field": "id", "type": "int32", "optional": False},
                  {"field": "name", "type": "string", "optional": True},
                  {"field": "email", "type": "string", "optional": True}],
    "products": [{"field": "id", "type": "int32", "optional": False},
                 {"field": "title", "type": "string", "optional": True},
                 {"field": "weight", "type": "float64", "optional": True}],
}
SOURCE = {"type": "struct", "optional": False, "name": "io.debezium.connector.mysql.Source", "fields": [
    {"field": "version", "type": "string", "optional": False},
    {"field": "connector", "type": "string", "optional": False},
    {"field": "name", "type": "string", "optional": False},
    {"field": "ts_ms", "type": "int64", "optional": False},
    {"field": "snapshot", "type": "string", "optional": True},
    {"field": "db", "type": "string", "optional": False},
    {"field": "table", "type": "string", "optional": True},
    {"field": "pos", "type": "int64", "optional": False}]}


def envelope_schema(table: str) -> dict[str, Any]:
    value = {"type": "struct", "optional": True, "name": f"dbserver1.inventory.{table}.Value",
             "fields": COLUMNS[table]}
    return {"type": "struct", "optional": False, "name": f"dbserver1.inventory.{table}.Envelope", "fields": [
        {**value, "field": "before"}, {**value, "field": "after"}, {**SOURCE, "field": "source"},
        {"field": "op", "type": "string", "optional": False},
        {"field": "ts_ms", "type": "int64", "optional": True}]}


def key(table: str, ident: int) -> bytes:
    schema = {"type": "struct", "optional": False, "name": f"dbserver1.inventory.{table}.Key",
              "fields": [{"field": "id", "type": "int32", "optional": False}]}
    return json_envelope(schema, {"id": ident})


class Source:
    """A Debezium-like source database: emits events and remembers the current rows."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[int, dict[str, Any]]] = {t: {} for t in COLUMNS}
        self.events: dict[str, list[tuple[bytes, bytes | None, int]]] = {t: [] for t in COLUMNS}
        self.pos = 0

    def emit(self, table: str, op: str, row: dict[str, Any] | None = None, ident: int | None = None) -> None:
        self.pos += 1
        ident = ident if ident is not None else row["id"]  # type: ignore[index]
        before = self.rows[table].get(ident)
        after = None if op == "d" else row
        source = {"version": "2.7.0", "connector": "mysql", "name": "dbserver1", "ts_ms": 1_790_000_000_000,
                  "snapshot": "true" if op == "r" else "false", "db": "inventory", "table": table, "pos": self.pos}
        payload = {"before": before if op in ("u", "d") else None, "after": after, "source": source, "op": op,
                   "ts_ms": 1_790_000_000_000 + self.pos}
        self.events[table].append((key(table, ident), json_envelope(envelope_schema(table), payload), 0))
        if op == "d":
            self.rows[table].pop(ident, None)
            self.events[table].append((key(table, ident), None, 0))  # Debezium's tombstone after a delete
        else:
            self.rows[table][ident] = dict(after)  # type: ignore[arg-type]
