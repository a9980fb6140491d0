"""Upsert against append on the same Spark/Iceberg write path, and what upserts cost readers.

1. Writes N keys (default 1,000,000, 10 columns) into an append table and into an upsert
   table (equality deletes on ``id``), in batches of 100,000 through tabletopic's own
   writer and committer, and prints records/s for both, measured in this run.
2. Commits further batches of updates (20,000 random existing keys each) to the upsert
   table and prints how long a full read (count and sum over every row) takes after 1, 10
   and 50 such commits: the read cost that compaction will have to bound.

    python bench/upsert_vs_append.py [--keys 1000000]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from tabletopic.buffer.table_buffer import Drained
from tabletopic.commit.table_committer import CommitResult, TableCommitter
from tabletopic.config.connector import parse_connector
from tabletopic.config.worker import parse_worker
from tabletopic.convert.records import UPSERT
from tabletopic.write.file_writer import FileWriter
from tabletopic.write.iceberg_tables import IcebergTables
from tabletopic.write.spark_session import SparkRuntime

BATCH = 100_000
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
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tabletopic-bench-"))
    spark = SparkRuntime({"spark.master": "local[2]", "spark.driver.memory": "3g"})
    try:
        worker = parse_worker({"bootstrap.servers": "127.0.0.1:9", "listeners": ""})
        base = {"name": "bench", "topics": "bench", "iceberg.tables": "bench.append,bench.upsert",
                "iceberg.tables.auto-create-enabled": "true", "iceberg.catalog.type": "hadoop",
                "iceberg.catalog.warehouse": "file://" + str(work / "warehouse")}
        append_tables = IcebergTables(spark, parse_connector(base, worker))
        upsert_config = parse_connector({**base, "iceberg.tables.upsert-mode-enabled": "true",
                                         "iceberg.tables.default-id-columns": "id"}, worker)
        upsert_tables = IcebergTables(spark, upsert_config)
        writer = FileWriter(spark, {})
        committer = TableCommitter(lambda: spark.jvm, "bench", "bench")
        spark.session  # noqa: B018 - start-up is not what is measured
        batches = [rows(np.arange(start, min(start + BATCH, args.keys)), 1)
                   for start in range(0, args.keys, BATCH)]
        # Both tables exist and have had a first write before the clock starts: creating a table (and
        # an upsert table's unpartitioned spec for its deletes) is not what is measured.
        write(append_tables, writer, committer, "bench.append", batches[0].slice(0, 10), 10, {})
        write(upsert_tables, writer, committer, "bench.upsert", batches[0].slice(0, 10), 10, {})
        rates = {}
        for label, tables, name in (("append", append_tables, "bench.append"),
                                    ("upsert (eq. deletes)", upsert_tables, "bench.upsert")):
            offsets = {TOPIC: 10}
            started = time.perf_counter()
            for i, batch in enumerate(batches):
                offsets = write(tables, writer, committer, name, batch, (i + 1) * BATCH + 10, offsets)
            rates[label] = args.keys / (time.perf_counter() - started)
        print(f"\n{args.keys:,} keys, 10 columns, batches of {BATCH:,}, Spark local[2]\n")
        for label, rate in rates.items():
            print(f"{label:24}{rate:>12,.0f} records/s")
        print(f"{'upsert / append':24}{rates['upsert (eq. deletes)'] / rates['append']:>12.2f}")

        session = spark.activate()
        rng = np.random.default_rng(7)
        offsets = {TOPIC: len(batches) * BATCH + 10}
        print("\nfull read of the upsert table (count and sum of every row) after N update commits:")
        for commit in range(1, 51):
            ids = np.sort(rng.choice(args.keys, 20_000, replace=False))
            offsets = write(upsert_tables, writer, committer, "bench.upsert", rows(ids, commit + 1),
                            offsets[TOPIC] + 20_000, offsets)
            if commit in (1, 10, 50):
                started = time.perf_counter()
                count, total = session.sql("SELECT count(*), sum(version) FROM iceberg.bench.upsert").collect()[0]
                print(f"  after {commit:2} commits: {time.perf_counter() - started:6.2f} s "
                      f"({count:,} rows, sum(version)={total:,})")
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
