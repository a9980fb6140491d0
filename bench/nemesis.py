"""The nemesis: faults of the network, of storage, of the catalog and of the processes, at random and
again and again, under live traffic, for as long as asked; then nothing may be lost or duplicated.

A daemon runs an append connector and an upsert connector with a CDC field (I, U, D) on S3 (moto)
behind a Glue catalog (moto), from Kafka (Tansu). Every connection goes through a fault proxy
(``tests/fault_proxy.py``): one the broker advertises, one in front of S3, one in front of Glue. The
producer goes through the Kafka proxy too. Until ``--minutes`` are spent, the nemesis picks a fault at
random, lets it last 3-8 s, heals it, and waits until both tables hold everything the broker had
acknowledged when it healed (up to 4 minutes); then the next. Faults:

- Kafka, S3 or Glue: every connection reset and new ones refused; traffic blackholed with sockets
  open; for Kafka, 0.2-0.5 s of latency; for S3, ``503 SlowDown`` to half the new connections;
- the daemon SIGKILLed and started again; its JVM SIGKILLed (the daemon stops) and the daemon
  started again, as systemd would.

All along, a second engine (a Spark session of the bench's own, straight to Glue and S3) appends rows
of its own (negative keys) to both tables and deletes them again, so the daemon's commits race another
writer's. Before each delete it counts its rows: a commit of the daemon's that dropped one of them
would show there.

At the end both tables must equal the fold of their topic's own log (every record once; the last
value per key, deleted keys absent), read by DuckDB from S3, and the dead-letter topic must be empty:
every fault here is the system's, never a record's. It prints each fault with its recovery time, the
retries it cost (from the daemon's metrics), and the warnings and errors the daemon logged for it.

    python bench/nemesis.py [--minutes 10] [--seed 1] [--keep]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the tests' proxy and traffic

from bench.e2e_throughput import java_child
from tests.fault_proxy import FaultProxy
from tests.nemesis_traffic import PARTITIONS, Traffic, fold, read_log
from tests.support import (
    TEST_JVM,
    DaemonProcess,
    Warehouse,
    create_topic,
    duckdb_connection,
    read_topic,
    scrape,
    unique,
    worker_props,
)

from tabletopic.config.connector import parse_connector
from tabletopic.config.worker import parse_worker
from tabletopic.demo.broker import EmbeddedBroker, free_port
from tabletopic.demo.lake_servers import MotoLake
from tabletopic.offsets.source_offsets import PyIcebergTable, recorded_in
from tabletopic.write.pyiceberg_catalog import open_table
from tabletopic.write.spark_session import SparkRuntime

RECOVERY_S = 240


@dataclass
class FaultRun:
    kind: str
    started: float  # time.time()
    seconds: float
    healed: float = 0.0
    recovered: float | None = None  # None: not within RECOVERY_S
    lines: collections.Counter[str] = field(default_factory=collections.Counter)
    retries: dict[str, float] = field(default_factory=dict)  # the daemon's retry counters, grown by this fault


# The daemon's counters of what it retried; a fault's cost is how much each grew while it lasted.
RETRY_COUNTERS = {"tabletopic_catalog_failures_total": "catalog", "tabletopic_commit_retries_total": "commit",
                  "tabletopic_commit_failures_total": "commit failed", "tabletopic_answers_rejected_total": "rejected"}


def _counters(port: int) -> dict[str, float]:
    """The retry counters, summed over labels; empty while the daemon does not answer."""
    try:
        _, samples = scrape(port)
    except OSError:
        return {}
    out: dict[str, float] = collections.defaultdict(float)
    for (name, _labels), value in samples.items():
        if name in RETRY_COUNTERS:
            out[RETRY_COUNTERS[name]] += value
    return dict(out)


class SecondEngine:
    """Another writer on the daemon's tables: a Spark session of its own, straight to Glue and S3, that
    appends a few rows with negative keys to each table and deletes them again, over and over, until
    stopped. Before each delete it counts its rows; a count short of what it added is a lost commit."""

    def __init__(self, warehouse: Warehouse, tables: dict[str, str], rng: random.Random) -> None:
        self._wh, self._tables, self._rng = warehouse, tables, rng
        self._stop = threading.Event()
        self.landed = collections.Counter[str]()  # "insert" and "delete" commits that landed
        self.refused: collections.Counter[str] = collections.Counter()  # by the Java exception's class
        self.short: list[str] = []  # its rows missing before a delete
        self._thread = threading.Thread(target=self._run, name="second-engine")

    def start(self) -> SecondEngine:
        self._thread.start()
        return self

    def halt(self) -> None:
        """Stop adding rows, without waiting."""
        self._stop.set()

    def stop(self) -> None:
        self.halt()
        if self._thread.is_alive():
            self._thread.join(300)
        for kind in self._tables:
            self._attempt("delete", lambda kind=kind: self._delete(kind))  # leave none of its rows behind

    def _run(self) -> None:
        n = 0
        while not self._stop.wait(self._rng.uniform(3, 10)):
            kind = self._rng.choice(sorted(self._tables))
            n += 1
            added = 3
            keys = ", ".join(f"(-{n * 10 + i}, 0, 'I')" if kind == "upsert" else f"(-{n * 10 + i})"
                             for i in range(added))
            columns = "(id, v, op)" if kind == "upsert" else "(seq)"
            insert = f"INSERT INTO {{c}}.{self._tables[kind]} {columns} VALUES {keys}"
            if not self._attempt("insert", lambda insert=insert: self._wh.sql(insert)):
                continue
            column = "id" if kind == "upsert" else "seq"
            have = self._wh.sql(f"SELECT count(*) FROM {{c}}.{self._tables[kind]} "
                                f"WHERE {column} <= -{n * 10} AND {column} > -{n * 10 + added}")[0][0]
            if have != added:
                self.short.append(f"{kind}: {have} of {added} rows of insert {n}")
            self._attempt("delete", lambda kind=kind: self._delete(kind))

    def _delete(self, kind: str) -> None:
        column = "id" if kind == "upsert" else "seq"
        self._wh.sql(f"DELETE FROM {{c}}.{self._tables[kind]} WHERE {column} < 0")

    def _attempt(self, what: str, action: Callable[[], object]) -> bool:
        try:
            action()
        except Exception as exc:  # a conflict with the daemon's commit: Spark gave up its retries
            self.refused[f"{what}: {type(exc).__name__} {str(exc).splitlines()[0][:80]}"] += 1
            return False
        self.landed[what] += 1
        return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    root = Path(tempfile.mkdtemp(prefix="nemesis-"))
    kafka_port = free_port()
    kafka = FaultProxy(kafka_port).start()
    spark = SparkRuntime({"spark.master": "local[1]", "spark.driver.memory": "768m", **TEST_JVM}, lake=True)
    with EmbeddedBroker(port=kafka_port, advertised_port=kafka.port, log_path=root / "tansu.log"), \
            MotoLake(log_path=root / "moto.log") as moto:
        s3, glue = FaultProxy(moto.s3_port).start(), FaultProxy(moto.s3_port).start()
        env = moto.glue_environment()
        os.environ.update(env)  # the bench's own reads of Glue and S3
        system = spark.jvm.java.lang.System  # the second engine's, as system properties
        for key, prop in (("AWS_ACCESS_KEY_ID", "aws.accessKeyId"), ("AWS_SECRET_ACCESS_KEY", "aws.secretAccessKey"),
                          ("AWS_REGION", "aws.region")):
            system.setProperty(prop, env[key])
        try:
            return _run(args, rng, root, kafka, s3, glue, moto, spark)
        finally:
            for proxy in (kafka, s3, glue):
                proxy.stop()
            spark.stop()
            if not args.keep:
                shutil.rmtree(root, ignore_errors=True)


def _run(args: argparse.Namespace, rng: random.Random, root: Path, kafka: FaultProxy, s3: FaultProxy,
         glue: FaultProxy, moto: MotoLake, spark: SparkRuntime) -> int:
    bootstrap = f"127.0.0.1:{kafka.port}"
    events, changes, dlq = unique("nem_events"), unique("nem_changes"), unique("nem_dlq")
    for topic in (events, changes):
        create_topic(bootstrap, topic, PARTITIONS)
    direct = moto.glue_props()
    proxied = {**direct, "s3.endpoint": f"http://127.0.0.1:{s3.port}", "glue.endpoint": f"http://127.0.0.1:{glue.port}"}
    catalog, namespace = unique("nem"), unique("ns").replace("-", "_")
    tables = {"append": f"{namespace}.events", "upsert": f"{namespace}.changes"}

    def connector(kind: str, props: dict[str, str]) -> dict[str, str]:
        common = {"iceberg.catalog": catalog, **{f"iceberg.catalog.{k}": v for k, v in props.items()},
                  "iceberg.tables.auto-create-enabled": "true", "iceberg.control.commit.interval-ms": "2000",
                  "value.converter.schemas.enable": "false", "errors.tolerance": "all",
                  "errors.deadletterqueue.topic.name": dlq, "errors.deadletterqueue.topic.replication.factor": "1"}
        if kind == "append":
            return {"name": "nem-append", "topics": events, "iceberg.tables": tables["append"], **common}
        return {"name": "nem-upsert", "topics": changes, "iceberg.tables": tables["upsert"],
                "iceberg.tables.default-id-columns": "id", "iceberg.tables.upsert-mode-enabled": "true",
                "iceberg.tables.cdc-field": "op", **common}

    port = free_port()
    worker = worker_props(bootstrap, listeners=f"http://127.0.0.1:{port}")
    daemon = DaemonProcess(root, worker, [connector("append", proxied), connector("upsert", proxied)],
                           env=moto.glue_environment()).start()
    readers = {kind: parse_connector(connector(kind, direct), parse_worker(worker)) for kind in tables}
    topic_of = {"append": events, "upsert": changes}

    def caught_up(acked: dict[tuple[str, int], int]) -> bool:
        for kind, table in tables.items():
            try:
                have = recorded_in(PyIcebergTable(open_table(readers[kind], table)), None,
                                   f"connect-nem-{kind}").offsets
            except Exception:  # not created yet, or a commit under way
                return False
            if any(have.get(tp, 0) < end for tp, end in acked.items() if tp[0] == topic_of[kind]):
                return False
        return True

    engine = SecondEngine(Warehouse(spark, root, direct, name=catalog), tables, random.Random(args.seed + 1))
    try:
        return _faults(args, rng, daemon, caught_up, kafka, s3, glue, root, bootstrap, events, changes, dlq, tables,
                       readers, moto, engine, port)
    finally:
        if daemon.alive():
            daemon.kill()


def _faults(args: argparse.Namespace, rng: random.Random, daemon: DaemonProcess,
            caught_up: Callable[[dict[tuple[str, int], int]], bool], kafka: FaultProxy, s3: FaultProxy,
            glue: FaultProxy, root: Path, bootstrap: str, events: str, changes: str, dlq: str,
            tables: dict[str, str], readers: dict[str, object], moto: MotoLake, engine: SecondEngine,
            port: int) -> int:
    traffic = Traffic(bootstrap, events, changes, batch=50, deletes=True).start()
    try:
        # The traffic goes on while the tables catch up: each wait is for what was acknowledged when it began.
        _wait(lambda: bool(traffic.acked), RECOVERY_S, daemon)
        if not _wait(partial(caught_up, dict(traffic.acked)), RECOVERY_S, daemon):
            print("the tables never caught up before the first fault", flush=True)
            return 1
        engine.start()
        faults: list[FaultRun] = []
        restarts = 0
        ends = time.monotonic() + args.minutes * 60
        while time.monotonic() < ends:
            kind = rng.choice(["kafka reset", "kafka blackhole", "kafka latency", "s3 503", "s3 reset", "s3 blackhole",
                               "glue reset", "glue blackhole", "daemon sigkill", "jvm sigkill"])
            seconds = rng.uniform(3, 8)
            run = FaultRun(kind, time.time(), seconds)
            before = _counters(port)
            target, what = kind.split()
            proxy = {"kafka": kafka, "s3": s3, "glue": glue}.get(target)
            if proxy is not None:
                _inject(proxy, what, seconds, rng)
                time.sleep(seconds)
            elif target == "daemon":
                daemon.kill()
                daemon.start()
                restarts += 1
            else:
                jvm = java_child(daemon.proc.pid) if daemon.proc is not None else None
                if jvm is not None:
                    os.kill(jvm, signal.SIGKILL)
                    code = daemon.wait(120)
                    run.kind = f"jvm sigkill (daemon exit {code})"
                    daemon.start()
                    restarts += 1
            run.healed = time.time()
            if _wait(partial(caught_up, dict(traffic.acked)), RECOVERY_S, daemon, restart=True):
                run.recovered = time.time()
            after = _counters(port)
            # A restart starts the counters again from zero: then what they hold is the fault's.
            run.retries = {k: v - before.get(k, 0) if v >= before.get(k, 0) else v for k, v in after.items()}
            faults.append(run)
            recovery = f"after {run.recovered - run.healed:.1f}s" if run.recovered else f"NOT within {RECOVERY_S}s"
            print(f"{run.kind:32} {run.seconds:4.1f}s  recovered {recovery}", flush=True)
            time.sleep(rng.uniform(2, 5))
        traffic.stop()
        engine.stop()
        return _verdict(args, root, daemon, traffic, faults, restarts, bootstrap, events, changes, dlq, tables,
                        readers, caught_up, moto, engine)

    finally:
        traffic.stop()  # idempotent: a run that ends early stops its producer too
        engine.halt()

def _inject(proxy: FaultProxy, what: str, seconds: float, rng: random.Random) -> None:
    if what == "reset":
        proxy.reset(seconds)
    elif what == "blackhole":
        proxy.blackhole(seconds)
    elif what == "latency":
        proxy.latency(seconds, rng.uniform(0.2, 0.5))
    else:
        proxy.http_errors(seconds, 0.5)


def _wait(condition: Callable[[], bool], timeout_s: float, daemon: DaemonProcess, restart: bool = False) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        if restart and not daemon.alive():
            daemon.start()  # as systemd restarts a daemon that exited
        time.sleep(0.5)
    return False


def _verdict(args: argparse.Namespace, root: Path, daemon: DaemonProcess, traffic: Traffic, faults: list[FaultRun],
             restarts: int, bootstrap: str, events: str, changes: str, dlq: str, tables: dict[str, str],
             readers: dict[str, object], caught_up: Callable[[dict[tuple[str, int], int]], bool],
             moto: MotoLake, engine: SecondEngine) -> int:
    logged, changed = read_log(bootstrap, events), read_log(bootstrap, changes)
    final = dict(traffic.acked)
    settled = _wait(lambda: caught_up(final), RECOVERY_S, daemon, restart=True)
    con = duckdb_connection(s3=True)
    con.execute(moto.duckdb_secret())
    location = {kind: open_table(readers[kind], table).metadata_location for kind, table in tables.items()}
    rows = collections.Counter(r[0] for r in con.execute(
        f"SELECT seq FROM iceberg_scan('{location['append']}')").fetchall())
    want = collections.Counter(r["seq"] for r in logged)
    state = dict(con.execute(f"SELECT id, v FROM iceberg_scan('{location['upsert']}')").fetchall())
    expected = fold(changed)
    dead = read_topic(bootstrap, dlq, expected=0)
    daemon.terminate()
    for run in faults:
        until = run.recovered or run.healed + RECOVERY_S
        for line in daemon.output().splitlines():
            if not line.startswith("{"):
                continue
            doc = json.loads(line)
            if doc.get("level") not in ("warning", "error", "critical"):
                continue
            at = datetime.fromisoformat(doc["timestamp"].replace("Z", "+00:00")).timestamp()
            if run.started <= at <= until:
                run.lines[f"{doc.get('logger')}: {str(doc.get('event'))[:70]}"] += 1
    lost = sum((want - rows).values())
    duplicated = sum((rows - want).values())
    wrong_keys = {k for k in set(state) | set(expected) if state.get(k) != expected.get(k)}
    print(f"\n{len(faults)} faults in {args.minutes:g} minutes, {restarts} restarts; "
          f"{len(logged)} records appended, {len(changed)} changes of {len(expected)} keys left; "
          f"sends that failed: {traffic.failed_sends}")
    print(f"append table: {lost} lost, {duplicated} duplicated; upsert table: {len(wrong_keys)} keys wrong; "
          f"dead-lettered: {len(dead)}; settled at the end: {settled}")
    recoveries = sorted(r.recovered - r.healed for r in faults if r.recovered)
    if recoveries:
        print(f"recovery after healing: median {recoveries[len(recoveries) // 2]:.1f}s, worst {recoveries[-1]:.1f}s; "
              f"not recovered: {sum(1 for r in faults if r.recovered is None)}")
    print(f"second engine: {dict(engine.landed)} commits landed; gave up: {sum(engine.refused.values())} "
          f"{dict(engine.refused.most_common(3))}; its rows missing before a delete: {engine.short or 'none'}")
    print("\nretries each fault cost, from the daemon's counters (from its start until the tables caught up):")
    for run in faults:
        print(f"  {run.kind:32} " + (", ".join(f"{k} {v:g}" for k, v in sorted(run.retries.items()) if v) or "none"))
    print("\nwarnings and errors logged per fault (from its start until the tables caught up):")
    for run in faults:
        print(f"  {run.kind:32} {sum(run.lines.values()):4}  " +
              "; ".join(f"{n}x {k}" for k, n in run.lines.most_common(3)))
    if args.keep:
        print(f"\nkept: {root}")
    ok = lost == 0 and duplicated == 0 and not wrong_keys and not dead and settled and not engine.short
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
