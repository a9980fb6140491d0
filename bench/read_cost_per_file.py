"""What each small data file costs a reader, and what rewriting them costs the daemon.

Two tables get N keys in one commit and then, one commit at a time, U updated keys each, through
tabletopic's own writer and committer (no Kafka, and no maintenance until the end):

* **append**: every commit adds a data file;
* **upsert**: every commit adds a data file and, as the daemon's commits do by default, replaces
  the table's position delete file with one naming every row its keys replaced.

After 0, 1, 2, 5, 10 and 20 commits it prints the median of seven full reads by Spark (count
and sum over every row, through a catalog that caches no table) beside the read of the same
table after its first commit, the baseline. Then the daemon's maintenance, with its default
triggers, looks at the upsert table once (``compaction.cheap-rewrite-bytes`` compacts it), and
the bench prints that run's seconds and bytes and the read after it. Every read is checked:
each key once, at the version of its last update (the append table: every row it was given).

    python bench/read_cost_per_file.py [--keys 200000] [--updates 5000]

With ``--keys 1700000`` the table is about 64 MiB, the default bound of a cheap rewrite.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from tabletopic.config.connector import parse_connector
from tabletopic.config.worker import parse_worker
from tabletopic.maintain.commit_positions import CommitPositions
from tabletopic.maintain.plan import plan_maintenance
from tabletopic.maintain.table_maintenance import run_plan
from tabletopic.maintain.table_stats import stats_from_java
from tabletopic.write.file_writer import FileWriter
from tabletopic.write.iceberg_tables import IcebergTables, TablesSettings
from tabletopic.write.spark_session import SparkRuntime
from tabletopic.write.table_actions import TableActions
from tabletopic.write.table_committer import TableCommitter
from upsert_vs_append import rows, write

CHECKPOINTS = (0, 1, 2, 5, 10, 20)
READS = 7


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, default=200_000)
    parser.add_argument("--updates", type=int, default=5_000)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tabletopic-bench-"))
    warehouse = "file://" + str(work / "warehouse")
    spark = SparkRuntime({"spark.master": "local[2]", "spark.driver.memory": "3g"})
    try:
        worker = parse_worker({"bootstrap.servers": "127.0.0.1:9", "listeners": ""})
        base = {"name": "bench", "topics": "bench", "iceberg.tables.auto-create-enabled": "true",
                "iceberg.catalog.type": "hadoop", "iceberg.catalog.warehouse": warehouse}
        upsert_config = parse_connector({**base, "iceberg.tables": "b.upsert",
                                         "iceberg.tables.upsert-mode-enabled": "true",
                                         "iceberg.tables.default-id-columns": "id"}, worker)
        tables = {"b.append": IcebergTables(spark, TablesSettings.of(
                      parse_connector({**base, "iceberg.tables": "b.append"}, worker))),
                  "b.upsert": IcebergTables(spark, TablesSettings.of(upsert_config))}
        # As a separate reader would: a caching catalog keeps serving the table object it loaded first.
        spark.register_catalog("reader", {"type": "hadoop", "warehouse": warehouse, "cache-enabled": "false"})
        writer = FileWriter(spark, {})
        # The daemon's rule: commits carry position deletes in place of equality deletes.
        positions = CommitPositions(upsert_config.maintenance, lambda name: name == "b.upsert")
        committer = TableCommitter(spark, "bench", "bench", positions=positions.committing)
        session = spark.activate()

        def read(name: str) -> tuple[int, int]:
            count, total = session.sql(f"SELECT count(*), sum(version) FROM reader.{name}").collect()[0]
            return int(count), int(total)

        def median_read(name: str, expected: tuple[int, int]) -> float:
            seconds = []
            for _ in range(READS):
                started = time.perf_counter()
                got = read(name)
                seconds.append(time.perf_counter() - started)
                assert got == expected, (name, got, expected)
            return sorted(seconds)[READS // 2]

        def shape(name: str) -> str:
            stats = stats_from_java(TableActions(spark, tables[name].get(name).java))
            return f"{stats.data_files}/{stats.delete_files}/{stats.manifests}"

        versions = np.ones(args.keys, dtype=np.int64)
        offsets = {name: write(tables[name], writer, committer, name, rows(np.arange(args.keys), 1), args.keys, {})
                   for name in tables}
        # The first hundred or so reads of a session are slower (the JVM compiles as it goes): warm up first,
        # so that the baseline is not the slowest read of the run.
        for _ in range(100):
            for name in tables:
                read(name)
        print(f"\n{args.keys:,} keys, then commits of {args.updates:,} updated keys; Spark local[2], median of "
              f"{READS} full reads\n")
        print(f"{'commits':>8}{'append files':>14}{'read':>8}{'vs 0':>7}{'upsert files':>16}{'read':>8}{'vs 0':>7}"
              "   (files: data/delete/manifests)")
        baseline: dict[str, float] = {}
        rng = np.random.default_rng(11)
        position = args.keys
        for commit in range(max(CHECKPOINTS) + 1):
            if commit:
                ids = np.sort(rng.choice(args.keys, args.updates, replace=False))
                position += args.updates
                for name in tables:
                    offsets[name] = write(tables[name], writer, committer, name, rows(ids, commit + 1), position,
                                          offsets[name])
                versions[ids] = commit + 1
            if commit not in CHECKPOINTS:
                continue
            append_rows = (args.keys + commit * args.updates, args.keys + sum(
                (c + 1) * args.updates for c in range(1, commit + 1)))
            expected = (args.keys, int(versions.sum()))
            line = f"{commit:>8}"
            for name, want, width in (("b.append", append_rows, 14), ("b.upsert", expected, 16)):
                seconds = median_read(name, want)
                baseline.setdefault(name, seconds)
                line += f"{shape(name):>{width}}{seconds:>7.3f}s{seconds / baseline[name]:>6.2f}x"
            print(line, flush=True)
        handle = tables["b.upsert"].get("b.upsert").java
        stats = stats_from_java(TableActions(spark, handle))
        plan = plan_maintenance(stats, upsert_config.maintenance, int(time.time() * 1000), orphans_due=False)
        assert plan.compact is not None and plan.compact_min_input_files == 2, plan  # the cheap rewrite's
        report = run_plan(TableActions(spark, handle), "b.upsert", plan, stats,
                          upsert_config.maintenance, "bench")
        after_s = median_read("b.upsert", expected)
        print(f"\nthe upsert table's look: {plan.compact}; it took {report.seconds:.2f}s, "
              f"{report.rewritten_bytes / 2**20:.1f} MiB rewritten, files {shape('b.upsert')} after; the read then "
              f"{after_s:.3f}s ({after_s / baseline['b.upsert']:.2f}x of the first commit's)")
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
