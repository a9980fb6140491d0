"""The demo's sample data: clickstream events as JSON, and shop orders and payments as Protobuf, framed
as Confluent's serializer frames them, with their schema registered in the built-in registry."""

from __future__ import annotations

import json
import random
import time
import urllib.request

from google.protobuf import message_factory

from tabletopic.kafka.clients import KafkaClients
from tabletopic.registry.protobuf_schema import parse as parse_proto
from tabletopic.registry.service import SchemaRegistryService

PARTITIONS = 4
PAGES = ["/", "/search", "/product/42", "/product/7", "/cart", "/checkout", "/help"]
ACTIONS = ["view", "view", "view", "click", "add_to_cart", "purchase"]
COUNTRIES = ["DE", "FR", "US", "BR", "IN", "JP", "NG"]
# Table Topic mode: each shop.* topic is its own table in namespace "shop", Protobuf through the registry.
SHOP_NAMESPACE = "shop"
SHOP_PROTO = """syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
message Order {
  int64 order_id = 1;
  int64 user_id = 2;
  repeated Line lines = 3;
  map<string, string> attributes = 4;
  oneof delivery { string address = 5; string pickup_store = 6; }
  google.protobuf.Timestamp placed_at = 7;
  message Line { string sku = 1; int32 quantity = 2; double price = 3; }
}
message Payment {
  int64 order_id = 1;
  Method method = 2;
  double amount = 3;
  google.protobuf.Timestamp paid_at = 4;
  enum Method { CARD = 0; TRANSFER = 1; WALLET = 2; }
}
"""
SHOP_TOPICS = {"shop.orders": "Order", "shop.payments": "Payment"}


def sample_events(n: int, seed: int = 7) -> list[tuple[bytes, bytes, int]]:
    rng = random.Random(seed)
    start = time.time() - 3 * 86_400
    events = []
    for i in range(n):
        user = rng.randrange(500)
        ts = start + i * (3 * 86_400 / n)
        event = {
            "event_id": i,
            "user_id": user,
            "session_id": f"s{user}-{int(ts // 1800)}",
            "page": rng.choice(PAGES),
            "action": rng.choice(ACTIONS),
            "country": rng.choice(COUNTRIES),
            "duration_ms": rng.randrange(50, 30_000),
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + "Z",
        }
        events.append((str(user).encode(), json.dumps(event).encode(), user % PARTITIONS))
    return events


def shop_events(n: int, schema_ids: dict[str, int], seed: int = 11) -> dict[str, list[tuple[bytes, bytes, int]]]:
    """``n`` orders and a payment for each, framed as Confluent's Protobuf serializer frames them."""
    pool = parse_proto(SHOP_PROTO, []).pool()
    order_cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))
    payment_cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Payment"))
    # magic byte, schema id, message index: Order is the file's first message ([0], one 0 byte), Payment
    # its second (one index, zig-zag encoded: count 1 is 0x02, index 1 is 0x02).
    frame = {"shop.orders": b"\x00" + schema_ids["shop.orders"].to_bytes(4, "big") + b"\x00",
             "shop.payments": b"\x00" + schema_ids["shop.payments"].to_bytes(4, "big") + b"\x02\x02"}
    rng = random.Random(seed)
    start = int(time.time()) - 3 * 86_400
    out: dict[str, list[tuple[bytes, bytes, int]]] = {t: [] for t in SHOP_TOPICS}
    for i in range(n):
        order = order_cls(order_id=i, user_id=rng.randrange(500), attributes={"channel": rng.choice(["web", "app"])})
        for _ in range(rng.randint(1, 3)):
            order.lines.add(sku=f"sku-{rng.randrange(40)}", quantity=rng.randint(1, 4),
                            price=rng.randrange(199, 9999) / 100)
        if i % 3:
            order.address = f"{rng.randrange(1, 200)} Main St"
        else:
            order.pickup_store = rng.choice(["north", "south"])
        order.placed_at.seconds = start + i * 20
        amount = round(sum(line.price * line.quantity for line in order.lines), 2)
        payment = payment_cls(order_id=i, method=rng.randrange(3), amount=amount)
        payment.paid_at.seconds = start + i * 20 + rng.randrange(60, 600)
        key = str(i).encode()
        out["shop.orders"].append((key, frame["shop.orders"] + order.SerializeToString(), i % 2))
        out["shop.payments"].append((key, frame["shop.payments"] + payment.SerializeToString(), i % 2))
    return out


def register_shop_schema(bootstrap: str, schemas_topic: str) -> dict[str, int]:
    """Register the shop schema under each topic's subject, in the topic the daemon's registry reads."""
    registry = SchemaRegistryService("http://127.0.0.1:0", KafkaClients([bootstrap], {}), schemas_topic, "BACKWARD")
    registry.start()
    try:
        ids = {}
        for topic in SHOP_TOPICS:
            body = json.dumps({"schema": SHOP_PROTO, "schemaType": "PROTOBUF"}).encode()
            request = urllib.request.Request(f"{registry.url}/subjects/{topic}-value/versions", data=body,
                                             method="POST", headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=10) as answer:
                ids[topic] = int(json.loads(answer.read())["id"])
        return ids
    finally:
        registry.stop()
