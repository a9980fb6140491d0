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

At the end both tables must equal the fold of their topic's own log (every record once; the last
value per key, deleted keys absent), read by DuckDB from S3, and the dead-letter topic must be empty:
every fault here is the system's, never a record's. It prints each fault with its recovery time and
the warnings and errors the daemon logged for it.

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
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the tests' proxy and traffic

from tests.fault_proxy import FaultProxy
from tests.nemesis_traffic import PARTITIONS, Traffic, fold, read_log
from tests.support import DaemonProcess, create_topic, duckdb_connection, read_topic, unique, worker_props

from tabletopic.config.connector import parse_connector
from tabletopic.config.worker import parse_worker
from tabletopic.demo.broker import EmbeddedBroker, free_port
from tabletopic.demo.lake_servers import MotoLake
from tabletopic.offsets.source_offsets import PyIcebergTable, recorded_in
from tabletopic.write.pyiceberg_catalog import open_table

RECOVERY_S = 240


@dataclass
class FaultRun:
    kind: str
    started: float  # time.time()
    seconds: float
    healed: float = 0.0
    recovered: float | None = None  # None: not within RECOVERY_S
    lines: collections.Counter[str] = field(default_factory=collections.Counter)


def _jvm_of(pid: int) -> int | None:
    """The Spark driver JVM the daemon ``pid`` started (its child named java)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
        if name == "java" and int(rest[1]) == pid:
            return int(entry.name)
    return None


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
    with EmbeddedBroker(port=kafka_port, advertised_port=kafka.port, log_path=root / "tansu.log"), \
            MotoLake(log_path=root / "moto.log") as moto:
        s3, glue = FaultProxy(moto.s3_port).start(), FaultProxy(moto.s3_port).start()
        os.environ.update(moto.glue_environment())  # the bench's own reads of Glue and S3
        try:
            return _run(args, rng, root, kafka, s3, glue, moto)
        finally:
            for proxy in (kafka, s3, glue):
                proxy.stop()
            if not args.keep:
                shutil.rmtree(root, ignore_errors=True)


def _run(args: argparse.Namespace, rng: random.Random, root: Path, kafka: FaultProxy, s3: FaultProxy,
         glue: FaultProxy, moto: MotoLake) -> int:
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

    worker = worker_props(bootstrap)
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

    try:
        return _faults(args, rng, daemon, caught_up, kafka, s3, glue, root, bootstrap, events, changes, dlq, tables,
                       readers, moto)
    finally:
        if daemon.alive():
            daemon.kill()


def _faults(args: argparse.Namespace, rng: random.Random, daemon: DaemonProcess,
            caught_up: Callable[[dict[tuple[str, int], int]], bool], kafka: FaultProxy, s3: FaultProxy,
            glue: FaultProxy, root: Path, bootstrap: str, events: str, changes: str, dlq: str,
            tables: dict[str, str], readers: dict[str, object], moto: MotoLake) -> int:
    traffic = Traffic(bootstrap, events, changes, batch=50, deletes=True).start()
    try:
        # The traffic goes on while the tables catch up: each wait is for what was acknowledged when it began.
        _wait(lambda: bool(traffic.acked), RECOVERY_S, daemon)
        if not _wait(partial(caught_up, dict(traffic.acked)), RECOVERY_S, daemon):
            print("the tables never caught up before the first fault", flush=True)
            return 1
        faults: list[FaultRun] = []
        restarts = 0
        ends = time.monotonic() + args.minutes * 60
        while time.monotonic() < ends:
            kind = rng.choice(["kafka reset", "kafka blackhole", "kafka latency", "s3 503", "s3 reset", "s3 blackhole",
                               "glue reset", "glue blackhole", "daemon sigkill", "jvm sigkill"])
            seconds = rng.uniform(3, 8)
            run = FaultRun(kind, time.time(), seconds)
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
                jvm = _jvm_of(daemon.proc.pid) if daemon.proc is not None else None
                if jvm is not None:
                    os.kill(jvm, signal.SIGKILL)
                    code = daemon.wait(120)
                    run.kind = f"jvm sigkill (daemon exit {code})"
                    daemon.start()
                    restarts += 1
            run.healed = time.time()
            if _wait(partial(caught_up, dict(traffic.acked)), RECOVERY_S, daemon, restart=True):
                run.recovered = time.time()
            faults.append(run)
            recovery = f"after {run.recovered - run.healed:.1f}s" if run.recovered else f"NOT within {RECOVERY_S}s"
            print(f"{run.kind:32} {run.seconds:4.1f}s  recovered {recovery}", flush=True)
            time.sleep(rng.uniform(2, 5))
        traffic.stop()
        return _verdict(args, root, daemon, traffic, faults, restarts, bootstrap, events, changes, dlq, tables,
                        readers, caught_up, moto)

    finally:
        traffic.stop()  # idempotent: a run that ends early stops its producer too

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
             moto: MotoLake) -> int:
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
    print("\nwarnings and errors logged per fault (from its start until the tables caught up):")
    for run in faults:
        print(f"  {run.kind:32} {sum(run.lines.values()):4}  " +
              "; ".join(f"{n}x {k}" for k, n in run.lines.most_common(3)))
    if args.keep:
        print(f"\nkept: {root}")
    ok = lost == 0 and duplicated == 0 and not wrong_keys and not dead and settled
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
