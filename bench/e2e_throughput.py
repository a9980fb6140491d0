"""End-to-end throughput and cost: a JSON backlog into an Iceberg table, beside the pipeline a user writes instead.

Produces N JSON records (default 2,000,000, about 135 bytes each, compact JSON) to a 4-partition topic on the
bundled broker (same cores), then measures in this one run:

* **aiokafka alone** consuming every record: no conversion, no writes;
* ``--runs`` times (default 3, medians count), one after the other:
  * **the pyiceberg pipeline** (``bench/pyiceberg_pipeline.py``: confluent-kafka, ``pyarrow.json``,
    ``Table.append`` to a SQLite catalog at the same commit interval), the strongest thing a user
    could pick instead;
  * **tabletopic** as a user starts it: ``tabletopic standalone worker.properties connector.properties``
    into a hadoop catalog on local files;

  each timed from "partitions assigned" until its commits hold every record, with the CPU-seconds
  of its process tree read from ``/proc`` over the same span (tabletopic: Python, and its JVM);
* every table read back by DuckDB: every id once;
* the utilisation trace of the median tabletopic run: Python's and the JVM's CPU % per second;
* ``--small`` records (default 500,000) into a daemon started cold: JVM start and warm-up
  included, as a user meets them.

With ``--upsert``, an upsert connector (``id`` as the key, positions found at commit, the default)
takes the pipeline's turns over the same records: upsert against append, end to end.

With ``--transforms``, a connector with a chain of five common single message transforms
(TimestampConverter on ``ts``, Cast of ``amount``, ReplaceField dropping ``session``, InsertField adding
the topic and offset, and Filter dropping tombstones by a RecordIsTombstone predicate) takes the
pipeline's turns: the same records with and without transforms, end to end.

With ``--sustained`` it instead starts a new CLI daemon per rate tried, produces at that rate from
a librdkafka producer in a process of its own for ``--warmup-s`` (30 s, while the JVM compiles the
write path) and then ``--window-s`` (120 s), and searches the highest rate at which the records
not yet committed stay under three intervals' worth through the window; it reports that rate, the
commit latency p50/p99 in the window (round start to snapshot, from the daemon's commit events)
and the peak RSS of the process tree (Python plus JVM) over the whole run.

    python bench/e2e_throughput.py [--records 2000000] [--interval-ms 2000] [--runs 3] [--small 500000]
                                   [--upsert | --transforms] [--format json|avro|protobuf] [--worker KEY=VALUE]
    python bench/e2e_throughput.py --sustained [--window-s 120] [--warmup-s 30] [--start-rate 120000]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from aiokafka import AIOKafkaConsumer

from tabletopic.demo.broker import EmbeddedBroker, create_topic, free_port, stop_process
from tabletopic.demo.lake_servers import duckdb_offline
from tabletopic.observe.logging_setup import configure_logging

TOPIC, SMALL, PARTITIONS, TABLE = "bench_json", "bench_cold", 4, "bench.events"


def record(i: int, rng: random.Random) -> bytes:
    return json.dumps({
        "id": i, "user": f"user-{rng.randrange(100_000):06d}", "action": rng.choice(["view", "click", "buy"]),
        "amount": round(rng.random() * 1000, 2), "country": rng.choice(["DE", "FR", "US", "JP"]),
        "ts": f"2026-11-{1 + i % 28:02d}T{i % 24:02d}:00:00Z", "session": f"{rng.getrandbits(64):016x}",
    }, separators=(",", ":")).encode()


# The same clickstream in the registry's formats, for the converters' end-to-end figures.
AVRO_SCHEMA = {"type": "record", "name": "Click", "namespace": "bench", "fields": [
    {"name": "id", "type": "long"}, {"name": "user", "type": "string"}, {"name": "action", "type": "string"},
    {"name": "amount", "type": "double"}, {"name": "country", "type": "string"},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}}, {"name": "session", "type": "string"},
]}
PROTO = """syntax = "proto3";
package bench;
import "google/protobuf/timestamp.proto";
message Click {
  int64 id = 1; string user = 2; string action = 3; double amount = 4; string country = 5;
  google.protobuf.Timestamp ts = 6; string session = 7;
}
"""
CONVERTERS = {"json": "org.apache.kafka.connect.json.JsonConverter",
              "avro": "io.confluent.connect.avro.AvroConverter",
              "protobuf": "io.confluent.connect.protobuf.ProtobufConverter"}


def encoder(fmt: str, bootstrap: str) -> Callable[[int, random.Random], bytes]:
    """Each record of the clickstream in ``fmt``: registered in the Schema Registry on the broker's
    ``_schemas`` topic (which the daemon's built-in registry serves) and framed in its wire format."""
    if fmt == "json":
        return record
    import io
    import struct
    import urllib.request

    from tabletopic.kafka.clients import KafkaClients
    from tabletopic.registry.service import SchemaRegistryService

    registry = SchemaRegistryService("http://127.0.0.1:0", KafkaClients([bootstrap], {}), "_schemas", "BACKWARD")
    registry.start()
    try:
        body = {"schema": json.dumps(AVRO_SCHEMA)} if fmt == "avro" else {"schema": PROTO, "schemaType": "PROTOBUF"}
        request = urllib.request.Request(f"{registry.url}/subjects/{TOPIC}-value/versions", method="POST",
                                         data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            schema_id = int(json.loads(response.read())["id"])
    finally:
        registry.stop()
    header = b"\x00" + struct.pack(">I", schema_id)

    def fields(i: int, rng: random.Random) -> dict[str, Any]:
        doc = json.loads(record(i, rng))
        doc["ts"] = 1_790_000_000_000 + (i % 28) * 86_400_000 + (i % 24) * 3_600_000
        return doc

    if fmt == "avro":
        import fastavro
        parsed = fastavro.parse_schema(AVRO_SCHEMA)

        def avro(i: int, rng: random.Random) -> bytes:
            out = io.BytesIO()
            out.write(header)
            fastavro.schemaless_writer(out, parsed, fields(i, rng))
            return out.getvalue()
        return avro
    from google.protobuf import message_factory

    from tabletopic.registry.protobuf_schema import parse
    click = message_factory.GetMessageClass(parse(PROTO, []).pool().FindMessageTypeByName("bench.Click"))

    def protobuf(i: int, rng: random.Random) -> bytes:
        doc = fields(i, rng)
        ts = doc.pop("ts")
        message = click(**doc)
        message.ts.seconds = ts // 1000
        return header + b"\x00" + message.SerializeToString()  # message index [0]
    return protobuf


def produce_fast(bootstrap: str, topic: str, n: int,
                 encode: Callable[[int, random.Random], bytes] = record) -> int:
    """``n`` records with librdkafka (a Python producer would take minutes for 2M); returns their bytes."""
    from confluent_kafka import Producer

    asyncio.run(create_topic(bootstrap, topic, PARTITIONS))
    rng = random.Random(1)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10000,
                         "queue.buffering.max.messages": 1_000_000, "acks": "all"})
    total = 0
    for i in range(n):
        value = encode(i, rng)
        total += len(value)
        send(producer, topic, value, i % PARTITIONS)
        if i % 10_000 == 0:
            producer.poll(0)
    if producer.flush(120):
        raise RuntimeError(f"{topic}: records still unsent after 120 s")
    return total


def send(producer: Any, topic: str, value: bytes, partition: int) -> None:
    """One record to librdkafka's queue, waiting for room in it when it is full."""
    while True:
        try:
            producer.produce(topic, value, partition=partition)
            return
        except BufferError:
            producer.poll(0.05)


async def aiokafka_alone(bootstrap: str, n: int) -> float:
    consumer = AIOKafkaConsumer(TOPIC, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                enable_auto_commit=False, group_id=None, max_partition_fetch_bytes=8 << 20)
    await consumer.start()
    seen, started = 0, None
    try:
        while seen < n:
            batch = await consumer.getmany(timeout_ms=1000, max_records=10_000)
            if started is None and batch:
                started = time.perf_counter()
            seen += sum(len(v) for v in batch.values())
    finally:
        await consumer.stop()
    return time.perf_counter() - (started or time.perf_counter())


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


# -- the process tree's CPU, from /proc -----------------------------------------------------------------
TICK = os.sysconf("SC_CLK_TCK")


def write_props(path: Path, props: dict[str, str]) -> None:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                tree.setdefault(int(fields[1]), []).append(int(entry.name))
    return tree


def java_child(pid: int) -> int | None:
    """The JVM that process ``pid`` started (its child named java): a daemon's Spark driver."""
    for child in _children().get(pid, []):
        with contextlib.suppress(OSError):
            if Path(f"/proc/{child}/comm").read_text().strip() == "java":
                return child
    return None


def cpu_seconds(pid: int) -> float:
    """utime + stime of one process (0 once it is gone)."""
    try:
        return cpu_seconds_of(Path(f"/proc/{pid}/stat"))
    except OSError:
        return 0.0


def tree_cpu(pid: int) -> tuple[float, float]:
    """(the process's own CPU-seconds, its descendants'): for tabletopic, Python and its JVM."""
    tree, below = _children(), 0.0
    stack = list(tree.get(pid, []))
    while stack:
        child = stack.pop()
        below += cpu_seconds(child)
        stack.extend(tree.get(child, []))
    return cpu_seconds(pid), below


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU-seconds of each kind of thread of a process tree, by thread name with digits dropped (the JVM's
    compilers and collectors apart from its executors), for where a run's CPU went."""
    tree, out, stack = _children(), {}, [pid]
    while stack:
        p = stack.pop()
        stack.extend(tree.get(p, []))
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{p}/task").iterdir():
                with contextlib.suppress(OSError):
                    name = (task / "comm").read_text().strip()
                    kind = ("python: " if p == pid else "jvm: ") + "".join(c for c in name if not c.isdigit())
                    out[kind] = out.get(kind, 0.0) + cpu_seconds_of(task / "stat")
    return out


def cpu_seconds_of(stat: Path) -> float:
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def tree_rss_mib(pid: int) -> float:
    tree, total, stack = _children(), 0.0, [pid]
    while stack:
        p = stack.pop()
        with contextlib.suppress(OSError):
            total += rss_mib(p)
        stack.extend(tree.get(p, []))
    return total


class Trace(threading.Thread):
    """Samples a process tree's CPU every second: the utilisation trace of a run."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.samples, self.peak_rss = pid, [], 0.0
        self.peak_python_rss = 0.0  # the daemon's own process; the rest of the tree is its JVM
        self.stopped = threading.Event()

    def run(self) -> None:
        last = tree_cpu(self.pid)
        while not self.stopped.wait(1.0):
            now = tree_cpu(self.pid)
            self.samples.append((time.monotonic(), 100 * (now[0] - last[0]), 100 * (now[1] - last[1])))
            self.peak_rss = max(self.peak_rss, tree_rss_mib(self.pid))
            with contextlib.suppress(OSError):
                self.peak_python_rss = max(self.peak_python_rss, rss_mib(self.pid))
            last = now


class Run:
    """One timed run: from partitions assigned until every record is committed."""

    def __init__(self, label: str, began: float, assigned: float, ended: float, cpu: tuple[float, float],
                 trace: list[tuple[float, float, float]], rows: int, peak_rss: float) -> None:
        self.label, self.rows, self.trace, self.peak_rss = label, rows, trace, peak_rss
        self.seconds, self.from_start = ended - assigned, ended - began
        self.python_cpu, self.jvm_cpu = cpu
        self.assigned = assigned
        self.threads: dict[str, float] = {}


def json_events(lines: Iterable[bytes], log: BinaryIO) -> Iterator[dict[str, Any]]:
    """Each JSON object a daemon logs, as it comes; every line of its output is copied to ``log``."""
    for raw in lines:
        log.write(raw)
        try:
            event = json.loads(raw)
        except ValueError:
            continue
        if isinstance(event, dict):
            yield event


def _timed(label: str, start: Callable[[], subprocess.Popen[bytes]], cwd: Path, n: int,
           parse: Callable[[dict[str, Any]], str | None], check: Callable[[], int], py_spy: str | None = None) -> Run:
    """``start`` a process and read its JSON log lines: ``parse`` names each line ``assigned``,
    ``committed:<n>`` or nothing. The CPU span is read from /proc when the events arrive."""
    began = time.monotonic()
    proc = start()
    trace = Trace(proc.pid)
    trace.start()
    watchdog = threading.Timer(600, proc.kill)  # a run that hangs ends the bench with its log, not never
    watchdog.start()
    assigned, cpu0, committed, threads0 = None, (0.0, 0.0), 0, {}
    log = open(cwd / "output.log", "wb")  # noqa: SIM115 - closed below
    profiler: subprocess.Popen[bytes] | None = None
    try:
        assert proc.stdout is not None
        for event in json_events(proc.stdout, log):
            kind = parse(event)
            if kind == "assigned" and assigned is None:
                assigned, cpu0, threads0 = time.monotonic(), tree_cpu(proc.pid), thread_cpu(proc.pid)
                if py_spy:  # the busy threads' stacks: where Python's CPU goes, per thread
                    profiler = subprocess.Popen(["py-spy", "record", "--pid", str(proc.pid), "--threads",
                                                 "--format", "raw", "--rate", "50", "-o", py_spy],
                                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            elif kind and kind.startswith("committed:"):
                committed += int(kind.split(":")[1])
                if committed >= n:
                    break
        else:
            log.flush()
            tail = (cwd / "output.log").read_bytes().splitlines()[-40:]
            raise RuntimeError(f"{label} exited before committing {n:,} records:\n"
                               + b"\n".join(tail).decode(errors="replace"))
        ended, cpu1 = time.monotonic(), tree_cpu(proc.pid)
        threads = {k: v - threads0.get(k, 0.0) for k, v in thread_cpu(proc.pid).items()}
        if profiler is not None:
            profiler.send_signal(signal.SIGINT)  # py-spy writes its profile on SIGINT
            profiler.wait(timeout=60)
    finally:
        log.close()
        watchdog.cancel()
        trace.stopped.set()
        stop_process(proc, grace_s=120)
    assert assigned is not None
    used = (cpu1[0] - cpu0[0], cpu1[1] - cpu0[1])
    samples = [(t - assigned, py, jvm) for t, py, jvm in trace.samples if assigned <= t <= ended + 1]
    run = Run(label, began, assigned, ended, used, samples, check(), trace.peak_rss)
    run.threads = {k: v for k, v in sorted(threads.items(), key=lambda kv: -kv[1]) if v >= 0.05}
    return run


def cli_daemon(run_dir: Path, bootstrap: str, interval_ms: int, connector: dict[str, str],
               worker: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """``tabletopic standalone worker.properties connector.properties`` started in ``run_dir``, as a user
    starts it: JSON logs on its standard output, a listener on a free port, schemaless JSON, tables
    created in a hadoop catalog in ``run_dir/warehouse``. ``connector`` names the connector and its
    topics; ``worker`` adds or overrides worker settings."""
    write_props(run_dir / "worker.properties", {
        "bootstrap.servers": bootstrap, "listeners": f"http://127.0.0.1:{free_port()}", "log.format": "json",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter", "value.converter.schemas.enable": "false",
        **(worker or {})})
    write_props(run_dir / "connector.properties", {
        "iceberg.tables.auto-create-enabled": "true", "iceberg.control.commit.interval-ms": str(interval_ms),
        "iceberg.catalog": "local", "iceberg.catalog.type": "hadoop",
        "iceberg.catalog.warehouse": "file://" + str(run_dir / "warehouse"), **connector})
    return subprocess.Popen([sys.executable, "-m", "tabletopic.cli", "standalone", str(run_dir / "worker.properties"),
                             str(run_dir / "connector.properties")], cwd=run_dir, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


# The same records into an upsert table: each id once, so the table must end as append's does.
UPSERT = {"iceberg.tables.upsert-mode-enabled": "true", "iceberg.tables.default-id-columns": "id"}
# Five transforms a connector commonly chains; every record stays (none is a tombstone), so the table must
# hold every id once, as without them.
TRANSFORMS = {
    "transforms": "time,cast,drop,insert,tombstones", "predicates": "tombstone",
    "transforms.time.type": "org.apache.kafka.connect.transforms.TimestampConverter$Value",
    "transforms.time.field": "ts", "transforms.time.target.type": "Timestamp",
    "transforms.time.format": "yyyy-MM-dd'T'HH:mm:ss'Z'",
    "transforms.cast.type": "org.apache.kafka.connect.transforms.Cast$Value", "transforms.cast.spec": "amount:float32",
    "transforms.drop.type": "org.apache.kafka.connect.transforms.ReplaceField$Value",
    "transforms.drop.exclude": "session",
    "transforms.insert.type": "org.apache.kafka.connect.transforms.InsertField$Value",
    "transforms.insert.topic.field": "source_topic", "transforms.insert.offset.field": "source_offset",
    "transforms.tombstones.type": "org.apache.kafka.connect.transforms.Filter",
    "transforms.tombstones.predicate": "tombstone",
    "predicates.tombstone.type": "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone",
}


def tabletopic_run(bootstrap: str, work: Path, name: str, n: int, interval_ms: int, topic: str = TOPIC,
                   py_spy: str | None = None, jfr: str | None = None, extra: dict[str, str] | None = None,
                   registry: bool = False, connector: dict[str, str] | None = None) -> Run:
    """``tabletopic standalone worker.properties connector.properties``, as a user starts it; ``extra`` adds
    worker settings, ``connector`` connector settings."""
    run_dir = work / name
    run_dir.mkdir()
    worker = {**({"schema.registry.listeners": f"http://127.0.0.1:{free_port()}"} if registry else {}),
              **({"spark.driver.extraJavaOptions": f"-XX:StartFlightRecording=filename={jfr},settings=profile"}
                 if jfr else {}), **(extra or {})}

    def parse(event: dict[str, Any]) -> str | None:
        if event.get("event") == "partitions assigned" and event.get("partitions"):
            return "assigned"
        if event.get("event") == "committed" and event.get("table") == TABLE:
            return f"committed:{event.get('records', 0)}"
        return None

    def check() -> int:
        return exact_rows(str(run_dir / "warehouse" / TABLE.replace(".", "/")), n)

    return _timed(f"tabletopic ({name})",
                  lambda: cli_daemon(run_dir, bootstrap, interval_ms, {"name": name, "topics": topic,
                                                                       "iceberg.tables": TABLE, **(connector or {})},
                                     worker),
                  run_dir, n, parse, check, py_spy)


def peer_run(bootstrap: str, work: Path, name: str, n: int, interval_ms: int) -> Run:
    """The pyiceberg pipeline (bench/pyiceberg_pipeline.py) over the same topic."""
    run_dir = work / name
    run_dir.mkdir()

    def parse(event: dict[str, Any]) -> str | None:
        if event.get("event") == "assigned":
            return "assigned"
        if event.get("event") == "committed":
            return f"committed:{event['records']}"
        return None

    def check() -> int:
        from pyiceberg.catalog.sql import SqlCatalog
        catalog = SqlCatalog("peer", uri=f"sqlite:///{run_dir}/warehouse/catalog.db",
                             warehouse=f"file://{run_dir}/warehouse")
        return exact_rows(catalog.load_table("bench.events").metadata_location, n)

    argv = [sys.executable, str(Path(__file__).with_name("pyiceberg_pipeline.py")), "--bootstrap", bootstrap,
            "--topic", TOPIC, "--records", str(n), "--warehouse", str(run_dir / "warehouse"),
            "--interval-ms", str(interval_ms), "--group", name]
    return _timed(f"pyiceberg pipeline ({name})",
                  lambda: subprocess.Popen(argv, cwd=run_dir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                           stdin=subprocess.DEVNULL), run_dir, n, parse, check)


def exact_rows(location: str, n: int) -> int:
    """The table's row count, after checking that it holds ids 0..n-1 once each (DuckDB reads it)."""
    con = duckdb_offline("avro", "iceberg")
    rows, distinct, low, high = con.execute(
        f"SELECT count(*), count(DISTINCT id), min(id), max(id) FROM iceberg_scan('{location}')").fetchone()
    if (rows, distinct, low, high) != (n, n, 0, n - 1):
        raise AssertionError(f"{location}: {rows:,} rows, {distinct:,} ids from {low} to {high}; expected 0..{n - 1}")
    return rows


def median(runs: list[Run]) -> Run:
    return sorted(runs, key=lambda r: r.seconds)[len(runs) // 2]


def backlog(args: argparse.Namespace, work: Path) -> None:
    with EmbeddedBroker(log_path=work / "broker.log") as broker:
        bootstrap = broker.bootstrap_servers
        encode = encoder(args.format, bootstrap)
        nbytes = produce_fast(bootstrap, TOPIC, args.records, encode)
        baseline = asyncio.run(aiokafka_alone(bootstrap, args.records))
        ours: list[Run] = []
        peers: list[Run] = []
        upserts: list[Run] = []
        chains: list[Run] = []
        extra = {"value.converter": CONVERTERS[args.format], **dict(kv.split("=", 1) for kv in args.worker)}
        for i in range(args.runs):  # taken one after another, alternating, so drift hits both alike
            if args.upsert:
                upserts.append(tabletopic_run(bootstrap, work, f"upsert-{i}", args.records, args.interval_ms,
                                              extra=extra, registry=args.format != "json", connector=UPSERT,
                                              py_spy=args.py_spy if i == 0 else None, jfr=args.jfr if i == 0 else None))
                print(f"  run {i + 1}: tabletopic upsert {upserts[-1].seconds:.1f} s", flush=True)
            elif args.transforms:
                chains.append(tabletopic_run(bootstrap, work, f"smt-{i}", args.records, args.interval_ms,
                                             extra=extra, registry=args.format != "json", connector=TRANSFORMS))
                print(f"  run {i + 1}: tabletopic with five transforms {chains[-1].seconds:.1f} s", flush=True)
            elif not args.no_peer:
                peers.append(peer_run(bootstrap, work, f"peer-{i}", args.records, args.interval_ms))
            ours.append(tabletopic_run(bootstrap, work, f"bench-{i}", args.records, args.interval_ms,
                                       py_spy=args.py_spy if i == 0 and not args.upsert else None,
                                       jfr=args.jfr if i == 0 and not args.upsert else None,
                                       extra=extra, registry=args.format != "json"))
            print(f"  run {i + 1}: tabletopic {ours[-1].seconds:.1f} s"
                  + (f", peer {peers[-1].seconds:.1f} s" if peers else ""), flush=True)
        small = None
        if args.small:
            produce_fast(bootstrap, SMALL, args.small, encode)  # decoded by the schema id each record carries
            small = tabletopic_run(bootstrap, work, "cold", args.small, args.interval_ms, SMALL, extra=extra,
                                   registry=args.format != "json")
    mib = nbytes / (1 << 20)
    per_m = 1e6 / args.records
    print(f"\n{args.records:,} {args.format} records, {mib:.1f} MiB of values ({nbytes / args.records:.0f} B each), "
          f"{PARTITIONS} partitions, commit interval {args.interval_ms} ms, {os.cpu_count()} cores, "
          f"broker on the same cores" + (f"; worker settings {args.worker}" if args.worker else "") + "\n")
    print(f"{'':34}{'seconds':>9}{'records/s':>11}{'MiB/s':>8}{'CPU-s':>8}{'Python':>8}{'JVM':>7}"
          f"{'µs CPU/rec':>12}{'peak RSS MiB':>14}")
    print(f"{'aiokafka alone, no writes':34}{baseline:>9.2f}{args.records / baseline:>11,.0f}{mib / baseline:>8.2f}")
    for run in [*peers, *upserts, *chains, *ours]:
        cpu = run.python_cpu + run.jvm_cpu
        print(f"{run.label:34}{run.seconds:>9.2f}{args.records / run.seconds:>11,.0f}{mib / run.seconds:>8.2f}"
              f"{cpu:>8.1f}{run.python_cpu:>8.1f}{run.jvm_cpu:>7.1f}{per_m * cpu:>12.1f}{run.peak_rss:>14,.0f}")
    us = median(ours)
    us_cpu = us.python_cpu + us.jvm_cpu
    print(f"\nmedians of {args.runs}: tabletopic {args.records / us.seconds:,.0f} records/s = "
          f"{mib / us.seconds:.2f} MiB/s; CPU-seconds per million records {per_m * us_cpu:.1f} "
          f"(Python {per_m * us.python_cpu:.1f}, JVM {per_m * us.jvm_cpu:.1f})")
    if peers:
        peer = median(peers)
        peer_cpu = peer.python_cpu + peer.jvm_cpu
        print(f"the pyiceberg pipeline: {args.records / peer.seconds:,.0f} records/s = {mib / peer.seconds:.2f} MiB/s; "
              f"CPU-seconds per million records {per_m * peer_cpu:.1f}")
        print(f"tabletopic against it: {peer.seconds / us.seconds:.2f}x its rate, {us_cpu / peer_cpu:.2f}x its CPU "
              f"per record")
    if upserts:
        up = median(upserts)
        print(f"tabletopic upsert (keyed on id, positions found at commit): {args.records / up.seconds:,.0f} records/s "
              f"= {us.seconds / up.seconds:.2f} of append; CPU-seconds per million records "
              f"{per_m * (up.python_cpu + up.jvm_cpu):.1f}")
    if chains:
        chain = median(chains)
        print(f"tabletopic with five transforms (TimestampConverter, Cast, ReplaceField, InsertField, Filter with a "
              f"predicate): {args.records / chain.seconds:,.0f} records/s = {us.seconds / chain.seconds:.2f} of the "
              f"rate without; CPU-seconds per million records {per_m * (chain.python_cpu + chain.jvm_cpu):.1f}")
    print(f"every run's rows exact: {all(r.rows == args.records for r in ours + peers + upserts + chains)} "
          f"({args.records:,} ids, each once, in each table)")
    print("\nutilisation trace of the median tabletopic run (CPU %, 100 = one core):")
    print(f"{'second':>7}{'Python':>8}{'JVM':>8}")
    for t, py, jvm in us.trace:
        print(f"{t:>7.0f}{py:>8.0f}{jvm:>8.0f}")
    for label, run in [("", us), (" upsert", median(upserts) if upserts else None)]:
        if run is None:
            continue
        print(f"\nCPU-seconds of the median tabletopic{label} run by thread (digits dropped from names):")
        for name, seconds in run.threads.items():
            print(f"  {name:40}{seconds:>7.2f}")
    if small is not None:
        print(f"\n{args.small:,} records, the daemon started cold (JVM start and warm-up included, as a user "
              f"meets it): {small.from_start:.1f} s from start = {args.small / small.from_start:,.0f} records/s; "
              f"{small.seconds:.1f} s from partitions assigned = {args.small / small.seconds:,.0f} records/s")


# -- sustained ----------------------------------------------------------------------------------------------
def _producer_process(bootstrap: str, topic: str, rate: int, seconds: float, start: int, sent: Any) -> None:
    """Produce ``rate`` records/s for ``seconds`` in a process of its own, with librdkafka (confluent-kafka): a
    Python producer would spend the sink's cores making the load. ``sent`` counts what was handed over."""
    from confluent_kafka import Producer

    rng = random.Random(start)
    values = [record(start + i, rng) for i in range(2000)]  # made ahead: the producer must keep pace, not build JSON
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 10000,
                         "queue.buffering.max.messages": 1_000_000, "enable.idempotence": False, "acks": 1})
    paced(producer, topic, rate, seconds, lambda i: (None, values[i % len(values)], i % PARTITIONS), sent)


def paced(producer: Any, topic: str, rate: int, seconds: float,
          record_at: Callable[[int], tuple[bytes | None, bytes, int]], sent: Any, flush_s: float = 60) -> None:
    """Hand ``producer`` (librdkafka's) record ``record_at(i)`` (key, value, partition) at ``rate`` a second for
    ``seconds``, then flush; ``sent`` counts what was handed over."""
    began = time.perf_counter()
    count = 0
    while (elapsed := time.perf_counter() - began) < seconds:
        due = int(elapsed * rate)
        while count < due:
            key, value, partition = record_at(count)
            try:
                producer.produce(topic, value, key=key, partition=partition)
            except BufferError:
                producer.poll(0.01)
                continue
            count += 1
        sent.value = count
        producer.poll(0)
        time.sleep(0.002)
    producer.flush(flush_s)
    sent.value = count


class DaemonOutput(threading.Thread):
    """Reads a daemon's JSON log lines as they come: when its partitions were assigned, and each commit."""

    def __init__(self, proc: subprocess.Popen[bytes], log_path: Path) -> None:
        super().__init__(daemon=True)
        self.proc, self.log_path = proc, log_path
        self.assigned = threading.Event()
        self.commits: list[tuple[float, int, float]] = []  # (when, records, round seconds)

    def run(self) -> None:
        assert self.proc.stdout is not None
        with open(self.log_path, "wb") as log:
            for event in json_events(self.proc.stdout, log):
                if event.get("event") == "partitions assigned" and event.get("partitions"):
                    self.assigned.set()
                elif event.get("event") == "committed" and event.get("table") == TABLE:
                    self.commits.append((time.monotonic(), int(event.get("records", 0)),
                                         float(event.get("round_seconds", 0.0))))

    def committed(self) -> int:
        return sum(records for _, records, _ in self.commits)


def _hold(bootstrap: str, work: Path, rate: int, window_s: float, interval_ms: int, step: int,
          warmup_s: float) -> dict[str, Any]:
    """A new daemon on a new topic while a producer sends ``rate`` records/s for ``warmup_s`` and then
    ``window_s``: does lag stay bounded through the window?"""
    name, topic = f"sustained-{step}", f"sustained_{step}"
    asyncio.run(create_topic(bootstrap, topic, PARTITIONS))
    run_dir = work / name
    run_dir.mkdir()
    proc = cli_daemon(run_dir, bootstrap, interval_ms, {"name": name, "topics": topic, "iceberg.tables": TABLE})
    output = DaemonOutput(proc, run_dir / "output.log")
    output.start()
    try:
        if not output.assigned.wait(180):
            raise RuntimeError(f"{name}: no partitions assigned; see {run_dir / 'output.log'}")
        sent = multiprocessing.Value("q", 0)
        producer = multiprocessing.Process(target=_producer_process,
                                           args=(bootstrap, topic, rate, warmup_s + window_s, step * 10_000_000,
                                                 sent))
        since = time.monotonic() + warmup_s
        producer.start()
        lags: list[tuple[float, int]] = []
        peak_rss = peak_python = 0.0
        while producer.is_alive():
            time.sleep(1)
            if time.monotonic() >= since:
                lags.append((time.monotonic() - since, sent.value - output.committed()))
            peak_rss = max(peak_rss, tree_rss_mib(proc.pid))
            with contextlib.suppress(OSError):
                peak_python = max(peak_python, rss_mib(proc.pid))
        producer.join()
        total = sent.value
        # What was produced in the window lands within a few intervals once the producer stops.
        deadline = time.monotonic() + 10 * interval_ms / 1000 + 30
        while output.committed() < total and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.5)
        landed = output.committed()
    finally:
        stop_process(proc, grace_s=120)
    latencies = sorted(seconds for when, _, seconds in output.commits if when >= since)
    # Bounded: the producer kept the rate, the records not committed stayed under three intervals' worth
    # through the whole window without growing, and everything produced landed.
    achieved = total / (warmup_s + window_s)
    bound = rate * 3 * interval_ms / 1000
    # Lag rises and falls with each round, so growth is judged on the halves' means, not on one sample.
    window = [lag for _, lag in lags]
    halves = (window[: len(window) // 2], window[len(window) // 2:])
    bounded = achieved >= 0.95 * rate and all(halves) and max(window) <= bound and landed >= total and \
        statistics.mean(halves[1]) <= statistics.mean(halves[0]) + rate
    p = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] if latencies else float("nan")  # noqa: E731
    (run_dir / "lag.json").write_text(json.dumps(lags))
    return {"rate": rate, "achieved": achieved, "bounded": bounded, "landed": landed, "sent": total,
            "max_lag": max((lag for _, lag in lags), default=0), "bound": bound,
            "p50": p(0.5), "p99": p(0.99), "commits": len(latencies), "rss_mib": peak_rss,
            "python_rss_mib": peak_python}


def sustained(args: argparse.Namespace, work: Path) -> None:
    results = []
    with EmbeddedBroker(log_path=work / "broker.log") as broker:
        bootstrap = broker.bootstrap_servers
        low, high = 0, None
        rate = args.start_rate
        for step in range(args.steps):
            result = _hold(bootstrap, work, rate, args.window_s, args.interval_ms, step, args.warmup_s)
            results.append(result)
            print(f"  {rate:>8,} records/s asked, {result['achieved']:>9,.0f} produced: "
                  f"{'bounded' if result['bounded'] else 'NOT bounded'}, max lag "
                  f"{result['max_lag']:,.0f} (bound {result['bound']:,.0f}), {result['landed']:,} of "
                  f"{result['sent']:,} landed, commit p50 {result['p50']:.2f} s, p99 {result['p99']:.2f} s, "
                  f"peak RSS {result['rss_mib']:,.0f} MiB (Python alone {result['python_rss_mib']:,.0f})", flush=True)
            if result["bounded"]:
                low = rate
                rate = int(rate * 1.25) if high is None else (rate + high) // 2
            else:
                high = rate
                rate = (low + rate) // 2
            if high is not None and high - low <= args.start_rate // 8:
                break
    best = max((r for r in results if r["bounded"]), key=lambda r: r["rate"], default=None)
    rng = random.Random(1)
    size = round(sum(len(record(i, rng)) for i in range(2000)) / 2000)
    print(f"\nsustained, the CLI daemon, {args.window_s:.0f} s windows after {args.warmup_s:.0f} s of the same load, "
          f"commit interval {args.interval_ms} ms, {os.cpu_count()} cores (broker and producer on them too):")
    if best is None:
        print("  no rate tried kept the lag bounded")
        return
    print(f"  highest bounded rate: {best['rate']:,} records/s = {best['rate'] * size / (1 << 20):.2f} MiB/s "
          f"({size} B records); commit latency (round start to snapshot) p50 {best['p50']:.2f} s, "
          f"p99 {best['p99']:.2f} s over {best['commits']} commits; peak RSS of the process tree "
          f"{best['rss_mib']:,.0f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--small", type=int, default=500_000,
                        help="then a cold daemon on this many records, JVM start included (0: skip)")
    parser.add_argument("--interval-ms", type=int, default=2_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--max-poll-records", type=int, default=10_000)
    parser.add_argument("--py-spy", help="profile the first tabletopic run's Python with py-spy (raw) into this file "
                                         "(the first upsert run's with --upsert)")
    parser.add_argument("--jfr", help="record the first tabletopic run's JVM with Java Flight Recorder into this file "
                                      "(the first upsert run's with --upsert)")
    parser.add_argument("--worker", action="append", default=[], metavar="KEY=VALUE",
                        help="a worker setting for the tabletopic runs (repeat): to try one's effect")
    parser.add_argument("--format", choices=sorted(CONVERTERS), default="json",
                        help="the records' format (avro and protobuf through the daemon's built-in registry)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (each run's output.log)")
    parser.add_argument("--upsert", action="store_true",
                        help="an upsert connector (keyed on id) takes the peer's turns: upsert against append")
    parser.add_argument("--no-peer", action="store_true", help="tabletopic alone (when trying settings)")
    parser.add_argument("--transforms", action="store_true",
                        help="the same records through a chain of five common transforms, in the peer's turns")
    parser.add_argument("--sustained", action="store_true", help="find the highest rate the sink keeps up with")
    parser.add_argument("--window-s", type=float, default=120.0)
    parser.add_argument("--warmup-s", type=float, default=30.0,
                        help="the same load before the window: the JVM compiles the write path in its first writes")
    parser.add_argument("--start-rate", type=int, default=120_000)
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args()
    configure_logging("WARNING", "console")
    work = Path(tempfile.mkdtemp(prefix="tabletopic-bench-"))
    try:
        if args.sustained:
            sustained(args, work)
        else:
            backlog(args, work)
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
