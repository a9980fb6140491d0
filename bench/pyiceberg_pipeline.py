"""The pipeline a Python engineer writes instead of running a sink: the peer of bench/e2e_throughput.py.

confluent-kafka consumes batches of up to 10,000 messages, ``pyarrow.json.read_json`` parses each
batch with an explicit schema, and pyiceberg's ``Table.append`` commits to a SQL catalog (SQLite)
every ``--interval-ms``. No exactly-once, no dead-letter queue, no schema evolution: the least a
user could run. It prints one JSON line per event (``assigned``, ``committed``, ``done``) on
standard output, with ``time.monotonic()`` stamps, for the bench to time it the way it times
tabletopic.

    python bench/pyiceberg_pipeline.py --bootstrap HOST:PORT --topic T --records N --warehouse DIR
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.json as pj
from confluent_kafka import Consumer
from pyiceberg.catalog.sql import SqlCatalog

SCHEMA = pa.schema([("id", pa.int64()), ("user", pa.string()), ("action", pa.string()), ("amount", pa.float64()),
                    ("country", pa.string()), ("ts", pa.string()), ("session", pa.string())])


def say(event: str, **fields: object) -> None:
    print(json.dumps({"event": event, "at": time.monotonic(), **fields}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--records", type=int, required=True)
    parser.add_argument("--warehouse", required=True)
    parser.add_argument("--interval-ms", type=int, default=2000)
    parser.add_argument("--group", default="peer", help="consumer group (a new one reads the topic from the start)")
    args = parser.parse_args()
    warehouse = Path(args.warehouse)
    warehouse.mkdir(parents=True, exist_ok=True)
    catalog = SqlCatalog("peer", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=f"file://{warehouse}")
    catalog.create_namespace_if_not_exists("bench")
    table = catalog.create_table_if_not_exists("bench.events", SCHEMA)
    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": args.group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "fetch.max.bytes": 64 << 20,
                         "max.partition.fetch.bytes": 8 << 20})
    consumer.subscribe([args.topic], on_assign=lambda c, parts: say("assigned", partitions=len(parts)))
    options = pj.ParseOptions(explicit_schema=SCHEMA, unexpected_field_behavior="ignore")
    pending: list[pa.Table] = []
    done = 0
    last_commit = time.monotonic()
    while done < args.records:
        messages = consumer.consume(num_messages=10_000, timeout=0.5)
        payload = b"\n".join(m.value() for m in messages if m.error() is None)
        if payload:
            pending.append(pj.read_json(pa.py_buffer(payload), parse_options=options))
        if pending and time.monotonic() - last_commit >= args.interval_ms / 1000:
            batch = pa.concat_tables(pending)
            table.append(batch)
            consumer.commit(asynchronous=False)
            done += batch.num_rows
            pending.clear()
            last_commit = time.monotonic()
            say("committed", records=batch.num_rows, total=done)
    consumer.close()
    say("done", rows=table.scan().to_arrow().num_rows)


if __name__ == "__main__":
    main()
