"""Protobuf records/s through tabletopic's ProtobufConverter, beside a bare protobuf parse of the same bytes.

Builds N messages (default 200,000) of a 12-field schema with a nested message, a
repeated field, a map, a oneof, an optional string, an enum and a Timestamp; registers
the ``.proto`` in the built-in Schema Registry (on a bundled broker, started here) and
frames each message in the Schema Registry wire format (magic byte, id, message index).
Then, in the same run:

* baseline: the protobuf runtime's ``FromString`` over every body, to message objects;
* tabletopic: ``ProtobufConverter.convert`` over batches of 2,000 (a fetch), to Arrow
  tables ready for the table.

    python bench/protobuf_decode.py [--records 200000] [--batch 2000]
"""

from __future__ import annotations

import argparse
import json
import struct
import time
import urllib.request

from google.protobuf import message_factory

from tabletopic.demo.broker import EmbeddedBroker
from tabletopic.kafka.clients import KafkaClients
from tabletopic.registry.protobuf_schema import parse
from tabletopic.registry.service import SchemaRegistryService
from tabletopic_plugins.converters.protobuf_converter import ProtobufConverter

PROTO = """syntax = "proto3";
package bench;
import "google/protobuf/timestamp.proto";
message Click {
  int64 id = 1;
  string user = 2;
  string page = 3;
  optional string referrer = 4;
  google.protobuf.Timestamp at = 5;
  int32 duration_ms = 6;
  double score = 7;
  repeated string tags = 8;
  Geo geo = 9;
  map<string, int64> counters = 10;
  oneof source { string campaign = 11; int64 partner = 12; }
  Device device = 13;
}
message Geo { string country = 1; double lat = 2; double lon = 3; }
enum Device { DESKTOP = 0; MOBILE = 1; TABLET = 2; }
"""


def message(cls: type, i: int) -> bytes:
    m = cls(id=i, user=f"user-{i % 5000}", page=f"/p/{i % 300}", duration_ms=i % 10_000, score=i / 7,
            tags=["a", f"t{i % 10}"], counters={"views": i % 50}, device=i % 3)
    if i % 3 == 0:
        m.referrer = "search"
    m.at.seconds, m.at.nanos = 1_790_000_000 + i, (i % 1000) * 1_000_000
    m.geo.country, m.geo.lat, m.geo.lon = "NL", 52.1, 4.3
    if i % 2:
        m.campaign = f"c{i % 7}"
    else:
        m.partner = i % 11
    return m.SerializeToString()


def register(url: str) -> int:
    body = json.dumps({"schema": PROTO, "schemaType": "PROTOBUF"}).encode()
    request = urllib.request.Request(f"{url}/subjects/clicks-value/versions", data=body, method="POST",
                                     headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return int(json.loads(response.read())["id"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=2_000)
    args = parser.parse_args()

    cls = message_factory.GetMessageClass(parse(PROTO, []).pool().FindMessageTypeByName("bench.Click"))
    with EmbeddedBroker() as broker:
        clients = KafkaClients([broker.bootstrap_servers], {})
        registry = SchemaRegistryService("http://127.0.0.1:0", clients, "_bench_schemas", "BACKWARD")
        registry.start()
        try:
            header = b"\x00" + struct.pack(">I", register(registry.url)) + b"\x00"  # message [0]
            values = [header + message(cls, i) for i in range(args.records)]
            payload_mib = sum(len(v) for v in values) / 2**20

            started = time.perf_counter()
            parse_body = cls.FromString
            for value in values:
                parse_body(memoryview(value)[6:])
            raw_s = time.perf_counter() - started

            converter = ProtobufConverter()
            converter.configure({"schema.registry.url": registry.url}, is_key=False)
            converter.convert("clicks", values[:1])  # the one registry lookup, outside the timing
            started = time.perf_counter()
            rows = 0
            for start in range(0, len(values), args.batch):
                result = converter.convert("clicks", values[start:start + args.batch])
                assert not result.failures, result.failures[:1]
                rows += sum(p.table.num_rows for p in result.parts)
            ours_s = time.perf_counter() - started
            assert rows == len(values)
        finally:
            registry.stop()

    n = len(values)
    print(f"{n:,} Protobuf records, {payload_mib:.1f} MiB in the wire format, 12 fields, batches of {args.batch:,}")
    print(f"{'':40}{'records/s':>12}{'MiB/s':>9}{'seconds':>9}")
    print(f"{'protobuf FromString (baseline)':40}{n / raw_s:12,.0f}{payload_mib / raw_s:9.1f}{raw_s:9.2f}")
    print(f"{'ProtobufConverter to Arrow (tabletopic)':40}{n / ours_s:12,.0f}{payload_mib / ours_s:9.1f}{ours_s:9.2f}")
    print(f"tabletopic / baseline: {raw_s / ours_s:.2f}x")


if __name__ == "__main__":
    main()
