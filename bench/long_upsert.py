"""A long upsert run through the daemon: maintenance off (the baseline), the default conversion of
equality deletes at commit, and conversion at the looks, in the same run.

For each mode it starts one ``tabletopic standalone`` (its own local[2] SparkSession; the test runs
local[1]) against an embedded broker and a hadoop warehouse, inserts KEYS keys, then produces
BATCHES batches of CHANGES random changes (updates, inserts, deletes and tombstones), each batch
waiting for its own commit.  Maintenance, where on, uses the settings of
``tests/test_maintenance.py``'s long test: a look after every round, compaction at 6 files or 6
deletes per file, 5 snapshots kept.  Every 10 batches the table's figures are read through
pyiceberg.  At the end it prints, per mode: the seconds per batch; the commits, and how many carried
equality deletes; the worst delete files, data files in one partition and snapshots seen; what the
looks converted and folded; the final files; a DuckDB full read's time (the median of five), and
whether DuckDB's rows equal the model.

Mode ``external`` marks the table ``external-compaction`` and has another engine compact it: a
SparkSession of this script's own runs ``rewrite_data_files`` with its defaults every
``--rewrite-every`` batches, on a schedule of its own, as a user's job would, with the daemon's looks
every ``--look-ms``. It prints how many of those rewrites landed. Every mode's DuckDB read is printed
beside a read of the same rows written to a table in one commit (the last column is the ratio).

    python bench/long_upsert.py [--keys 200000] [--batches 160] [--changes 1000]
        [--modes off,commit,look,external] [--rewrite-every 40] [--look-ms 40000]
        [--format-version 2|3] [--duckdb-limit SECONDS] [--keep]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import duckdb
from aiokafka import AIOKafkaProducer

from tabletopic.config.connector import parse_connector
from tabletopic.config.worker import parse_worker
from tabletopic.demo.broker import EmbeddedBroker, create_topic
from tabletopic.demo.lake_servers import duckdb_offline
from tabletopic.maintain.table_stats import stats_from_pyiceberg
from tabletopic.offsets.source_offsets import PyIcebergTable, recorded_in
from tabletopic.write.pyiceberg_catalog import open_table

PARTITIONS = 4
TABLE = "cdc.accounts"
DAY_S = 86_400
READS = 5  # one read of a few tenths of a second varies by tens of percent
BASE_S = 1_789_000_000
TIGHT = {
    "tabletopic.maintenance.interval-ms": "0",
    "tabletopic.maintenance.compaction.delete-files": "6",
    "tabletopic.maintenance.compaction.min-input-files": "6",
    "tabletopic.maintenance.compaction.cheap-rewrite-bytes": "0",
    "tabletopic.maintenance.snapshots.older-than-ms": "0",
    "tabletopic.maintenance.snapshots.retain-last": "5",
    "tabletopic.maintenance.orphans.older-than-ms": "3600000",
    "tabletopic.maintenance.orphans.interval-ms": "20000",
    "tabletopic.maintenance.manifests.max-count": "20",
}


class Model:
    """The last change per key, and how many records each partition was sent."""

    def __init__(self, keys: int) -> None:
        self.rng = random.Random(5)
        self.keys = keys
        self.rows: dict[int, tuple[int, str]] = {}
        self.per_partition = [0] * PARTITIONS
        self.version = 0

    def inserts(self) -> list[tuple[bytes, bytes | None, int]]:
        out = []
        for key in range(self.keys):
            self.rows[key] = (0, "2026-09-20 00:00:00")
            out.append(self._sent(key, {"id": key, "op": "I", "v": 0, "updated_at": "2026-09-20T00:00:00Z"}))
        return out

    def changes(self, n: int) -> list[tuple[bytes, bytes | None, int]]:
        out = []
        for _ in range(n):
            key = self.rng.randrange(self.keys)
            roll = self.rng.random()
            if roll < 0.12:
                self.rows.pop(key, None)
                out.append(self._sent(key, None))
            elif roll < 0.25:
                self.rows.pop(key, None)
                out.append(self._sent(key, {"id": key, "op": "D"}))
            else:
                self.version += 1
                # The day moves, so a key's row changes partition under day(updated_at).
                ts = BASE_S + self.rng.randrange(5) * DAY_S + self.rng.randrange(DAY_S)
                iso = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))
                self.rows[key] = (self.version, iso.replace("T", " ").rstrip("Z"))
                out.append(self._sent(key, {"id": key, "op": "U", "v": self.version, "updated_at": iso}))
        return out

    def _sent(self, key: int, value: dict[str, Any] | None) -> tuple[bytes, bytes | None, int]:
        self.per_partition[key % PARTITIONS] += 1
        return str(key).encode(), None if value is None else json.dumps(value).encode(), key % PARTITIONS

    @property
    def produced(self) -> int:
        return sum(self.per_partition)


async def produce(bootstrap: str, topic: str, records: list[tuple[bytes, bytes | None, int]]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, max_batch_size=512 * 1024)
    await producer.start()
    try:
        sent = [await producer.send(topic, value, key=key, partition=partition) for key, value, partition in records]
        await asyncio.gather(*sent)
    finally:
        await producer.stop()


def read_duckdb(location: Path, limit_s: float, times: int = READS) -> tuple[float, list[Any] | None]:
    """The median of ``times`` full reads, each in a fresh DuckDB, and the rows read. DuckDB applies
    equality deletes super-linearly: a read past ``limit_s`` is stopped (inf, None)."""
    timed = [_read_duckdb(location, limit_s) for _ in range(times)]
    return statistics.median(s for s, _ in timed), timed[-1][1]


def _read_duckdb(location: Path, limit_s: float) -> tuple[float, list[Any] | None]:
    db = duckdb_offline("avro", "iceberg")
    stopper = threading.Timer(limit_s, db.interrupt)
    started = time.monotonic()
    stopper.start()
    try:
        rows = db.execute(f"SELECT id, v, strftime(updated_at AT TIME ZONE 'UTC', '%Y-%m-%d %H:%M:%S') "
                          f"FROM iceberg_scan('{location}')").fetchall()
    except duckdb.InterruptException:
        return float("inf"), None
    finally:
        stopper.cancel()
    return time.monotonic() - started, rows


def props(path: Path, values: dict[str, object]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    return path


class OtherEngine:
    """Another engine beside the daemon: a SparkSession of this script's own, on the same warehouse."""

    def __init__(self, work: Path) -> None:
        from tabletopic.write.spark_session import SparkRuntime
        self.spark = SparkRuntime({"spark.master": "local[1]", "spark.ui.enabled": "false"})
        self.work = work
        self.spark.register_catalog("other", {"type": "hadoop", "warehouse": f"file://{work}",
                                              "cache-enabled": "false"})

    def rewrite(self, mode: str) -> str | None:
        """Compact the table with rewrite_data_files' defaults: None when it landed, else why not."""
        try:
            self.spark.session.sql(f"CALL other.system.rewrite_data_files(table => '{mode}.{TABLE}')").collect()
            return None
        except Exception as exc:  # py4j's error: Iceberg's reason is in its message
            return str(exc).splitlines()[0][:200]

    def write_once(self, rows: dict[int, tuple[int, str]]) -> Path:
        """The same rows as the table, written in one commit: the read every mode is compared with."""
        session = self.spark.session
        frame = session.createDataFrame([(k, v, ts) for k, (v, ts) in rows.items()], "id long, v long, ts string")
        frame.createOrReplaceTempView("model_rows")
        session.sql("CREATE NAMESPACE IF NOT EXISTS other.once")
        # Partitioned as the sink's table is, with the session's time zone set to UTC by SparkRuntime.
        session.sql("CREATE TABLE other.once.accounts USING iceberg PARTITIONED BY (days(updated_at)) AS "
                    "SELECT id, v, cast(ts AS timestamp) AS updated_at FROM model_rows")
        return self.work / "once" / "accounts"

    def stop(self) -> None:
        self.spark.stop()


def run(mode: str, bootstrap: str, work: Path, args: argparse.Namespace, other: OtherEngine | None) -> dict[str, Any]:
    topic, name = f"long-{mode}", f"long_{mode}"
    asyncio.run(create_topic(bootstrap, topic, PARTITIONS))
    maintenance = ({"tabletopic.maintenance.enabled": "false"} if mode == "off" else
                   {"tabletopic.maintenance.enabled": "true", "tabletopic.maintenance.interval-ms": str(args.look_ms),
                    "tabletopic.maintenance.orphans.interval-ms": "86400000",
                    f"iceberg.table.{TABLE}.external-compaction": "true"} if mode == "external" else
                   {"tabletopic.maintenance.enabled": "true", **TIGHT,
                    "tabletopic.maintenance.equality-deletes.convert": mode})
    connector = {"name": name, "topics": topic, "iceberg.tables": TABLE,
                 "value.converter.schemas.enable": "false", "iceberg.tables.auto-create-enabled": "true",
                 "iceberg.tables.default-id-columns": "id", "iceberg.tables.upsert-mode-enabled": "true",
                 "iceberg.tables.cdc-field": "op", "iceberg.tables.default-partition-by": "day(updated_at)",
                 "iceberg.control.commit.interval-ms": "300", "iceberg.catalog.type": "hadoop",
                 "iceberg.catalog.warehouse": f"file://{work}/{mode}",
                 "iceberg.tables.auto-create-props.format-version": str(args.format_version), **maintenance}
    worker = {"bootstrap.servers": bootstrap, "listeners": "", "log.format": "json", "spark.master": "local[2]",
              "spark.driver.memory": "1g", "key.converter": "org.apache.kafka.connect.storage.StringConverter"}
    config = parse_connector(connector, parse_worker(worker))
    group = f"connect-{name}"
    home = work / f"{mode}-daemon"
    home.mkdir()
    log_path = home / "daemon.log"
    with open(log_path, "wb") as log:
        daemon = subprocess.Popen([sys.executable, "-m", "tabletopic.cli", "standalone",
                                   str(props(home / "w.properties", worker)),
                                   str(props(home / "c.properties", connector))],
                                  cwd=home, stdout=log, stderr=subprocess.STDOUT)

    def committed() -> int:
        try:
            return sum(recorded_in(PyIcebergTable(open_table(config, TABLE)), None, group).offsets.values())
        except FileNotFoundError:  # not created yet, or a metadata file replaced while read
            return 0

    def wait_committed(what: str, produced: int) -> None:
        deadline = time.monotonic() + 300
        while committed() != produced:
            if daemon.poll() is not None or '"connector stopped"' in log_path.read_text(errors="replace"):
                raise SystemExit(f"the daemon stopped while waiting for {what}; see {log_path}")
            if time.monotonic() > deadline:
                raise SystemExit(f"timed out waiting for {what}; see {log_path}")
            time.sleep(0.1)

    model = Model(args.keys)
    worst = {"delete files": 0, "files in a partition": 0, "snapshots": 0}
    rewrites: list[str | None] = []
    try:
        asyncio.run(produce(bootstrap, topic, model.inserts()))
        wait_committed("the inserts", model.produced)
        started = time.monotonic()
        for batch in range(args.batches):
            asyncio.run(produce(bootstrap, topic, model.changes(args.changes)))
            wait_committed(f"batch {batch}", model.produced)
            if other is not None and batch % args.rewrite_every == args.rewrite_every - 1:
                rewrites.append(other.rewrite(mode))
            if batch % 10 == 9:
                now = stats_from_pyiceberg(open_table(config, TABLE))
                worst = {"delete files": max(worst["delete files"], now.delete_files),
                         "files in a partition": max(worst["files in a partition"], now.most_files_in_partition),
                         "snapshots": max(worst["snapshots"], len(now.snapshots))}
        per_batch = (time.monotonic() - started) / args.batches
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(120)
    events = [json.loads(line) for line in log_path.read_text(errors="replace").splitlines()
              if line.startswith("{") and ('"maintained"' in line or '"committed"' in line)]
    looks = [e for e in events if e.get("event") == "maintained"]
    commits = [e for e in events if e.get("event") == "committed"]
    read_s, rows = read_duckdb(work / mode / "cdc" / "accounts", args.duckdb_limit)
    final = stats_from_pyiceberg(open_table(config, TABLE))
    if rewrites:
        print(f"{mode}: other engine's rewrites landed {rewrites.count(None)} of {len(rewrites)}"
              + "".join(f"; refused: {r}" for r in rewrites if r is not None))
    return {"mode": mode, "s/batch": per_batch, "commits": len(commits),
            "with equality deletes": sum(e["equality_deletes"] > 0 for e in commits), **worst,
            "converted": sum(e["equality_deletes_converted"] for e in looks),
            "folded": sum(e["delete_files_folded"] for e in looks),
            "compactions": sum("compact" in e["steps"] for e in looks),
            "final data files": final.data_files, "final manifests": final.manifests,
            "final delete files": final.delete_files, "final equality deletes": final.equality_deletes,
            "final snapshots": len(final.snapshots),
            "DuckDB read s": read_s,
            "rows equal the model": "not read" if rows is None else
            len(rows) == len(model.rows) and {int(r[0]): (int(r[1]), r[2]) for r in rows} == model.rows,
            "rows": model.rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, default=200_000)
    parser.add_argument("--batches", type=int, default=160)
    parser.add_argument("--changes", type=int, default=1_000)
    parser.add_argument("--modes", default="off,commit,look,external")
    parser.add_argument("--format-version", type=int, default=2, choices=(2, 3),
                        help="the tables' format: 3 has deletion vectors where 2 has position delete files")
    parser.add_argument("--rewrite-every", type=int, default=40, help="external: batches between the other "
                        "engine's rewrites")
    parser.add_argument("--look-ms", type=int, default=40_000, help="external: tabletopic.maintenance.interval-ms")
    parser.add_argument("--keep", action="store_true", help="keep the warehouse and the daemons' logs")
    parser.add_argument("--duckdb-limit", type=float, default=120.0, help="seconds before a DuckDB read is stopped")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tabletopic-long-"))
    try:
        other = OtherEngine(work)
        try:
            with EmbeddedBroker(log_path=work / "broker.log") as broker:
                results = [run(mode, broker.bootstrap_servers, work, args, other if mode == "external" else None)
                           for mode in args.modes.split(",")]
            # Every mode ends with the same rows: the model's changes come from one seed.
            once_s, _ = read_duckdb(other.write_once(results[0].pop("rows")), args.duckdb_limit)
            for result in results[1:]:
                result.pop("rows")
        finally:
            other.stop()
        for result in results:
            result["x one commit"] = result["DuckDB read s"] / once_s
        print(f"format version {args.format_version}: {args.keys:,} keys, then {args.batches} batches of "
              f"{args.changes:,} changes, each its own commit; "
              f"{PARTITIONS} partitions, day(updated_at); 'off' is the baseline, maintenance disabled; "
              f"the same rows written in one commit read in {once_s:.2f} s (DuckDB reads: median of {READS})")
        widths = {c: max(len(c), 6) + 2 for c in results[0]}
        print("".join(f"{c:>{widths[c]}}" for c in widths))
        for result in results:
            print("".join(f"{v:>{widths[c]}.2f}" if isinstance(v, float) else f"{v!s:>{widths[c]}}"
                          for c, v in result.items()))
    finally:
        if args.keep:
            print(f"kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
