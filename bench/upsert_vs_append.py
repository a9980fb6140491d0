"""Upsert against append on the same Spark/Iceberg write path, and what upserts cost readers.

1. Writes N keys (default 1,000,000, 10 columns) into an append table and into two upsert
   tables (keyed on ``id``), in batches of 100,000 through tabletopic's own writer and
   committer, and prints records/s for each, measured in this run: the three take turns, three
   times, after a warm-up of each, and the median counts. One upsert table's commits
   carry equality deletes; the other's carry their rows' positions, found at commit as the
   daemon does by default (position delete files on v2, deletion vectors on v3).
2. Commits further batches of updates (20,000 random existing keys each) to both upsert
   tables and prints how long a full read (count and sum over every row) takes after 1, 10
   and 50 such commits: the read cost that maintenance will have to bound.

Each table format given runs both parts on tables of its own.

    python bench/upsert_vs_append.py [--keys 1000000] [--format-versions 2,3]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import pyarrow as pa

from tabletopic.buffer.table_buffer import Drained
from tabletopic.config.connector import parse_connector
from tabletopic.config.worker import parse_worker
from tabletopic.convert.records import UPSERT
from tabletopic.write.file_writer import FileWriter
from tabletopic.write.iceberg_tables import IcebergTables, TablesSettings
from tabletopic.write.spark_session import SparkRuntime
from tabletopic.write.table_committer import CommitResult, TableCommitter

BATCH = 100_000
TURNS = 3
TOPIC = ("bench", 0)


def rows(ids: np.ndarray, version: int) -> pa.Table:
    n = len(ids)
    rng = np.random.default_rng(version)
    columns = {"id": pa.array(ids, pa.int64()), "version": pa.array(np.full(n, version), pa.int64())}
    for i in range(4):
        columns[f"metric_{i}"] = pa.array(rng.random(n))
    for i in range(4):
        columns[f"label_{i}"] = pa.array([f"v{x % 997}" for x in ids], pa.string())
    return pa.table(columns)


def write(tables: IcebergTables, writer: FileWriter, committer: TableCommitter, name: str, batch: pa.Table,
          position: int, expected: dict, results: list[CommitResult] | None = None) -> dict:
    handle = tables.get(name, batch.schema)
    n = batch.num_rows
    drained = Drained(name, batch, n, batch.nbytes, None, {TOPIC: position}, np.full(n, UPSERT, dtype=np.int8),
                      np.arange(n, dtype=np.int64))
    written = writer.write(handle, drained)
    result = committer.commit(handle, written.files, {TOPIC: position}, expected, None)
    if results is not None:
        results.append(result)
    return result.offsets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--format-versions", default="2,3")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tabletopic-bench-"))
    spark = SparkRuntime({"spark.master": "local[2]", "spark.driver.memory": "3g"})
    try:
        spark.session  # noqa: B018 - start-up is not what is measured
        for version in args.format_versions.split(","):
            run(spark, work / f"v{version}", version, args.keys)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)


def run(spark: SparkRuntime, work: Path, version: str, keys: int) -> None:
    worker = parse_worker({"bootstrap.servers": "127.0.0.1:9", "listeners": ""})
    base = {"name": f"bench{version}", "topics": "bench",
            "iceberg.tables": "bench.append,bench.upsert,bench.positions",
            "iceberg.tables.auto-create-enabled": "true", "iceberg.catalog": f"v{version}",
            "iceberg.catalog.type": "hadoop", "iceberg.catalog.warehouse": "file://" + str(work),
            "iceberg.tables.auto-create-props.format-version": version}
    append_tables = IcebergTables(spark, TablesSettings.of(parse_connector(base, worker)))
    upsert_tables = IcebergTables(spark, TablesSettings.of(parse_connector(
        {**base, "iceberg.tables.upsert-mode-enabled": "true", "iceberg.tables.default-id-columns": "id"}, worker)))
    writer = FileWriter(spark, {})
    equality = TableCommitter(spark, "bench", "bench")
    # As the daemon's default commits: the rows of the deleted keys found at commit, up to 5 million read.
    positions = TableCommitter(spark, "bench", "bench", positions=lambda table: nullcontext(5_000_000))
    runs = (("append", append_tables, "bench.append", equality),
            ("upsert, equality deletes", upsert_tables, "bench.upsert", equality),
            ("upsert, " + ("deletion vectors" if version == "3" else "position deletes"), upsert_tables,
             "bench.positions", positions))
    batches = [rows(np.arange(start, min(start + BATCH, keys)), 1) for start in range(0, keys, BATCH)]
    # Neither creating a table (and an upsert table's unpartitioned spec for its deletes) nor the JVM's
    # warm-up is what is measured: each way of writing first writes three batches to a table of its
    # own, and each timed table exists, with ten rows, before its clock starts. The three ways then
    # take turns, three times, on fresh tables; the median counts.
    for _, tables, name, committer in runs:
        offsets = {}
        for i, batch in enumerate(batches[:3]):
            offsets = write(tables, writer, committer, f"{name}_warm", batch, (i + 1) * BATCH, offsets)
    rates: dict[str, list[float]] = {label: [] for label, *_ in runs}
    for turn in range(TURNS):
        for label, tables, name, committer in runs:
            table = name if turn == TURNS - 1 else f"{name}_{turn}"  # the last turn's tables are read below
            write(tables, writer, committer, table, batches[0].slice(0, 10), 10, {})
            offsets = {TOPIC: 10}
            started = time.perf_counter()
            for i, batch in enumerate(batches):
                offsets = write(tables, writer, committer, table, batch, (i + 1) * BATCH + 10, offsets)
            rates[label].append(keys / (time.perf_counter() - started))
    print(f"\nformat version {version}: {keys:,} keys, 10 columns, batches of {BATCH:,}, Spark local[2], "
          f"median of {TURNS} turns\n")
    base = statistics.median(rates["append"])
    for label, measured in rates.items():
        rate = statistics.median(measured)
        runs_seen = ", ".join(f"{r:,.0f}" for r in measured)
        print(f"{label:34}{rate:>12,.0f} records/s  ({rate / base:.2f} of append)   runs: {runs_seen}")

    session = spark.activate()
    print(f"\nformat version {version}: full read (count and sum of every row) after N commits of 20,000 updates:")
    for label, tables, name, committer in runs[1:]:
        rng = np.random.default_rng(7)
        offsets = {TOPIC: len(batches) * BATCH + 10}
        for commit in range(1, 51):
            ids = np.sort(rng.choice(keys, 20_000, replace=False))
            offsets = write(tables, writer, committer, name, rows(ids, commit + 1), offsets[TOPIC] + 20_000, offsets)
            if commit in (1, 10, 50):
                session.sql(f"REFRESH TABLE v{version}.{name}")  # the catalog caches a table for 30 s
                started = time.perf_counter()
                count, total = session.sql(f"SELECT count(*), sum(version) FROM v{version}.{name}").collect()[0]
                print(f"  {label:32} after {commit:2} commits: {time.perf_counter() - started:6.2f} s "
                      f"({count:,} rows, sum(version)={total:,})")


if __name__ == "__main__":
    main()
