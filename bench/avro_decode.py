"""Avro records/s through tabletopic's AvroConverter, beside fastavro's raw decode of the same bytes.

Builds N records (default 200,000) of a 12-field schema with a nested record, an
array, an optional string, a timestamp and a decimal, registers the schema in the
built-in Schema Registry (on a bundled broker, started here), and encodes each
record in the Schema Registry wire format.  Then, in the same run:

* baseline: ``fastavro.schemaless_reader`` over every body, to Python dicts;
* tabletopic: ``AvroConverter.convert`` over batches of 2,000 (a fetch), to Arrow
  tables ready for the table.

    python bench/avro_decode.py [--records 200000] [--batch 2000]
"""

from __future__ import annotations

import argparse
import datetime
import decimal
import io
import json
import struct
import time
import urllib.request

import fastavro

from tabletopic.demo.broker import EmbeddedBroker
from tabletopic.kafka.clients import KafkaClients
from tabletopic.registry.service import SchemaRegistryService
from tabletopic_plugins.converters.avro_converter import AvroConverter

SCHEMA = {"type": "record", "name": "Click", "namespace": "bench", "fields": [
    {"name": "id", "type": "long"},
    {"name": "user", "type": "string"},
    {"name": "page", "type": "string"},
    {"name": "referrer", "type": ["null", "string"], "default": None},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "duration_ms", "type": "int"},
    {"name": "score", "type": "double"},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
    {"name": "mobile", "type": "boolean"},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "geo", "type": {"type": "record", "name": "Geo", "fields": [
        {"name": "country", "type": "string"}, {"name": "lat", "type": "double"}, {"name": "lon", "type": "double"}]}},
    {"name": "session", "type": "long"},
]}


def record(i: int) -> dict:
    return {"id": i, "user": f"user-{i % 5000}", "page": f"/p/{i % 300}", "referrer": None if i % 3 else "search",
            "at": datetime.datetime(2026, 11, 1, tzinfo=datetime.timezone.utc) + datetime.timedelta(seconds=i),
            "duration_ms": i % 10_000, "score": i / 7, "price": decimal.Decimal(i % 100_000) / 100,
            "mobile": i % 2 == 0, "tags": ["a", f"t{i % 10}"],
            "geo": {"country": "NL", "lat": 52.1, "lon": 4.3}, "session": i // 20}


def register(url: str) -> int:
    body = json.dumps({"schema": json.dumps(SCHEMA)}).encode()
    request = urllib.request.Request(f"{url}/subjects/clicks-value/versions", data=body, method="POST",
                                     headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return int(json.loads(response.read())["id"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=2_000)
    args = parser.parse_args()

    with EmbeddedBroker() as broker:
        clients = KafkaClients([broker.bootstrap_servers], {})
        registry = SchemaRegistryService("http://127.0.0.1:0", clients, "_bench_schemas", "BACKWARD")
        registry.start()
        try:
            schema_id = register(registry.url)
            parsed = fastavro.parse_schema(SCHEMA)
            header = b"\x00" + struct.pack(">I", schema_id)
            values = []
            for i in range(args.records):
                out = io.BytesIO()
                out.write(header)
                fastavro.schemaless_writer(out, parsed, record(i))
                values.append(out.getvalue())
            payload_mib = sum(len(v) for v in values) / 2**20

            started = time.perf_counter()
            for value in values:
                body = io.BytesIO(value)
                body.seek(5)
                fastavro.schemaless_reader(body, parsed, None)
            raw_s = time.perf_counter() - started

            converter = AvroConverter()
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
    print(f"{n:,} Avro records, {payload_mib:.1f} MiB in the wire format, 12 fields, batches of {args.batch:,}")
    print(f"{'':38}{'records/s':>12}{'MiB/s':>9}{'seconds':>9}")
    print(f"{'fastavro schemaless_reader (baseline)':38}{n / raw_s:12,.0f}{payload_mib / raw_s:9.1f}{raw_s:9.2f}")
    print(f"{'AvroConverter to Arrow (tabletopic)':38}{n / ours_s:12,.0f}{payload_mib / ours_s:9.1f}{ours_s:9.2f}")
    print(f"tabletopic / baseline: {raw_s / ours_s:.2f}x")


if __name__ == "__main__":
    main()
