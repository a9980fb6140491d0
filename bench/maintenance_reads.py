"""What maintenance buys readers of an upsert table, and what it costs the sink.

Three tables get the same rows through tabletopic's own writer and committer (no Kafka):

* **plain**: N keys in one commit, then C commits of U updated keys each, no maintenance;
* **maintained**: the same commits, with the daemon's maintenance (same plan, same Spark
  actions) run on its own thread between commits, as the coordinator runs it: a whole look
  every ``--look-every`` commits, and only the conversion of equality deletes after the others;
  by default each commit carries position deletes in place of its equality deletes, as the
  daemon's commits do, so those conversions only find the deletes of commits made during a
  compaction (``--convert round``: every commit carries equality deletes);
* **one commit**: the same keys at the same versions, written in a single commit: the best a
  reader can hope for.

It prints full-read times (count and sum over every row) by Spark and by DuckDB after 1, 10,
50 and 200 commits for the first two, the one-commit table's read beside them, and the
records/s of the write-and-commit path with maintenance on and off, all from this run. The
maintained and the one-commit tables' figures are the median of three reads in a row. A
checkpoint falls on one moment of the maintenance cycle, so the maintained table is also read
once after each of its last ``--tail-reads`` commits but the checkpoints, and the bench prints
how those reads spread against the one-commit read, all of them and those during which no
maintenance step ran (a step's Spark jobs take the same two cores). Every read is checked: each
key once, at the version of its last update.

    python bench/maintenance_reads.py [--keys 200000] [--updates 5000] [--commits 200] [--look-every N]
        [--commit-every SECONDS] [--read-delay SECONDS] [--convert commit|round|off]
        [--delete-files N] [--min-input-files N] [--cheap-rewrite-bytes N] [--max-manifests N]
        [--tail-reads N]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from tabletopic.config.connector import parse_connector
from tabletopic.config.worker import parse_worker
from tabletopic.demo.lake_servers import duckdb_offline
from tabletopic.maintain.commit_positions import CommitPositions
from tabletopic.maintain.plan import plan_conversion, plan_maintenance
from tabletopic.maintain.table_maintenance import run_plan
from tabletopic.maintain.table_stats import stats_from_java
from tabletopic.write.file_writer import FileWriter
from tabletopic.write.iceberg_tables import IcebergTables, TablesSettings
from tabletopic.write.spark_session import SparkRuntime
from tabletopic.write.table_actions import TableActions
from tabletopic.write.table_committer import CommitResult, TableCommitter
from upsert_vs_append import rows, write

CHECKPOINTS = (1, 10, 50, 200)


class Background:
    """The coordinator's pattern: after a commit, start a maintenance run unless one is under way."""

    def __init__(self, spark: SparkRuntime, tables: IcebergTables, name: str, settings,
                 commit_positions: CommitPositions) -> None:
        self.spark, self.tables, self.name, self.settings = spark, tables, name, settings
        self.commit_positions = commit_positions
        self.thread: threading.Thread | None = None
        self.runs = 0
        self.last_look = 0
        self.errors: list[str] = []
        self.step: str | None = None  # the step under way
        self.seen: set[str] = set()  # the steps under way at some moment since watch()

    def watch(self) -> None:
        self.seen = {self.step} if self.step else set()

    def _starting(self, step: str) -> None:
        self.step = step
        self.seen.add(step)
        if step == "compact":
            self.commit_positions.compaction_starts(self.name)
        else:
            self.commit_positions.compaction_ends(self.name)

    def poke(self, commit: int, look_every: int = 1) -> None:
        """Unless a run is under way, start a look (every step whose trigger is met) if ``look_every``
        commits passed since the last one began, else only a conversion (none with ``--convert off``):
        the coordinator's rule, with the interval counted in commits."""
        if self.thread is None or not self.thread.is_alive():
            look = commit - self.last_look >= look_every
            if not look and not self.settings.converts_every_round:
                return
            if look:
                self.last_look = commit
            self.thread = threading.Thread(target=self._run, args=(look,), daemon=True)
            self.thread.start()

    def _run(self, look: bool) -> None:
        try:
            context = self.spark.activate().sparkContext
            context.setLocalProperty("spark.scheduler.pool", "tabletopic-maintenance")
            table = self.tables.get(self.name).java
            stats = stats_from_java(TableActions(self.spark, table))
            plan = (plan_maintenance(stats, self.settings, int(time.time() * 1000), orphans_due=False) if look
                    else plan_conversion(stats, self.settings))
            if not plan.empty:
                run_plan(TableActions(self.spark, table), self.name, plan, stats,
                         self.settings, "bench", starting=self._starting)
                self.runs += 1
        except Exception as exc:  # shown at the end: a bench must not hide a failed run
            self.errors.append(str(exc).splitlines()[0])
        finally:
            self.step = None
            self.commit_positions.compaction_ends(self.name)

    def join(self) -> None:
        if self.thread is not None:
            self.thread.join()


def read_spark(spark: SparkRuntime, name: str) -> tuple[float, tuple[int, int]]:
    """Seconds, and (rows, sum of versions): what the table must equal."""
    started = time.perf_counter()
    count, total = spark.activate().sql(f"SELECT count(*), sum(version) FROM reader.{name}").collect()[0]
    return time.perf_counter() - started, (int(count), int(total))


def read_duckdb(location: Path, limit_s: float) -> tuple[float, tuple[int, int] | None]:
    """DuckDB applies equality deletes super-linearly: a read past ``limit_s`` is stopped and shown as such."""
    db = duckdb_offline("avro", "iceberg")
    stopper = threading.Timer(limit_s, db.interrupt)
    started = time.perf_counter()
    stopper.start()
    try:
        count, total = db.execute(f"SELECT count(*), sum(version) FROM iceberg_scan('{location}')").fetchone()
    except Exception:  # interrupted
        return float("inf"), None
    finally:
        stopper.cancel()
    return time.perf_counter() - started, (int(count), int(total))


def median_of_3(read: Callable[[], tuple[float, Any]]) -> tuple[float, Any]:
    """The median of three reads in a row, and what they read: the rows are the same in all three, even
    where maintenance commits in between. One read of a table this small takes a tenth of a second, and a
    single slow one (a garbage collection, the other thread's task) would decide the figure."""
    done = sorted((read() for _ in range(3)), key=lambda r: r[0])
    assert len({r[1] for r in done}) == 1, done
    return done[1]


def _s(seconds: float, limit: float) -> str:
    return f"{seconds:.2f}s" if seconds != float("inf") else f">{limit:.0f}s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, default=200_000)
    parser.add_argument("--updates", type=int, default=5_000)
    parser.add_argument("--commits", type=int, default=200)
    # The maintained table's triggers; unset, the daemon's defaults.
    parser.add_argument("--delete-files", type=int, help="compaction.delete-files")
    parser.add_argument("--min-input-files", type=int, help="compaction.min-input-files")
    parser.add_argument("--cheap-rewrite-bytes", type=int, help="compaction.cheap-rewrite-bytes (0: off)")
    parser.add_argument("--max-manifests", type=int, help="manifests.max-count")
    parser.add_argument("--look-every", type=int, default=1,
                        help="commits between two whole looks; the commits between only convert (the daemon's "
                             "interval-ms, counted in commits)")
    parser.add_argument("--convert", choices=("commit", "round", "off"), default="commit",
                        help="where equality deletes become position deletes: in each commit (the daemon's "
                             "default), after each commit (round), or nowhere (off: plain rewriting)")
    parser.add_argument("--commit-every", type=float, default=0.0,
                        help="seconds from one commit of the maintained table to the next (0: as fast as the "
                             "writer goes, a commit every quarter second or so); the daemon's default is 300")
    parser.add_argument("--read-delay", type=float, default=0.0,
                        help="seconds from a checkpoint's commit to its reads of the maintained table (0: at once, "
                             "before that commit's equality deletes can be converted)")
    parser.add_argument("--tail-reads", type=int, default=50,
                        help="read the maintained table once after each of its last N commits too (but the "
                             "checkpoints) and print how those reads spread")
    parser.add_argument("--duckdb-limit", type=float, default=120.0, help="seconds before a DuckDB read is stopped")
    args = parser.parse_args()
    overrides = {key: value for key, value in (
        ("compaction.delete-files", args.delete_files), ("compaction.min-input-files", args.min_input_files),
        ("compaction.cheap-rewrite-bytes", args.cheap_rewrite_bytes), ("manifests.max-count", args.max_manifests),
    ) if value is not None}
    work = Path(tempfile.mkdtemp(prefix="tabletopic-bench-"))
    warehouse = work / "warehouse"
    spark = SparkRuntime({"spark.master": "local[2]", "spark.driver.memory": "3g"})
    try:
        worker = parse_worker({"bootstrap.servers": "127.0.0.1:9", "listeners": ""})
        config = parse_connector({
            "name": "bench", "topics": "bench", "iceberg.tables": "b.plain,b.maintained,b.single",
            "iceberg.tables.auto-create-enabled": "true", "iceberg.catalog.type": "hadoop",
            "iceberg.catalog.warehouse": "file://" + str(warehouse),
            "iceberg.tables.upsert-mode-enabled": "true", "iceberg.tables.default-id-columns": "id",
            # The daemon's defaults, except a look after every commit instead of every 10 minutes.
            "tabletopic.maintenance.interval-ms": "0",
            **{f"tabletopic.maintenance.{key}": str(value) for key, value in overrides.items()},
            "tabletopic.maintenance.equality-deletes.convert": args.convert,
        }, worker)
        tables = IcebergTables(spark, TablesSettings.of(config))
        # Reads go through a catalog of their own that caches nothing, as a separate reader's would:
        # a caching Spark catalog keeps serving the table object it loaded while the writer and the
        # maintenance commit through another, and a read then measures an old snapshot.
        spark.register_catalog("reader", {"type": "hadoop", "warehouse": "file://" + str(warehouse),
                                          "cache-enabled": "false"})
        writer = FileWriter(spark, {})
        # The maintainer's rule, for the maintained table only.
        commit_positions = CommitPositions(config.maintenance, lambda name: name == "b.maintained")
        committer = TableCommitter(spark, "bench", "bench", positions=commit_positions.committing)
        spark.session  # noqa: B018 - start-up is not what is measured
        first = rows(np.arange(args.keys), 1)
        triggers = ", ".join(f"{key}={value}" for key, value in overrides.items()) or "the default triggers"
        triggers += ", equality deletes " + {"off": "left to compaction",
                                             "round": "turned into position deletes after each commit",
                                             "commit": "replaced by position deletes in each commit"}[args.convert]
        triggers += ", a whole look after " + ("every commit" if args.look_every == 1
                                               else f"every {args.look_every} commits")
        if args.commit_every:
            triggers += f", the maintained table's commits {args.commit_every:g}s apart"
        if args.read_delay:
            triggers += f", its reads {args.read_delay:g}s after the commit"
        print(f"\n{args.keys:,} keys, then {args.commits} commits of {args.updates:,} updated keys, "
              f"Spark local[2]; maintenance with {triggers}\n")
        reads: dict[str, dict[int, tuple[float, float]]] = {}
        rates: dict[str, float] = {}
        carried: dict[str, int] = {}  # commits that carried equality deletes
        commit_s: dict[str, float] = {}  # the median commit's seconds (the committer's part, files written)
        during: dict[int, str] = {}  # the maintenance steps under way during a checkpoint's reads
        # What Spark plans and opens at a checkpoint: data files, delete files and manifests just before
        # its read. At this table's size each costs a reader as much as thousands of rows.
        shape: dict[int, str] = {}
        # One read of each kind after each of the maintained table's last --tail-reads commits but the
        # checkpoints: a checkpoint is one moment of the maintenance cycle, and these are all of its moments.
        tail: list[tuple[float, float, bool]] = []  # Spark's and DuckDB's seconds, and no maintenance step ran
        background = None
        for name in ("b.plain", "b.maintained"):
            offsets = write(tables, writer, committer, name, first, args.keys, {})
            position = args.keys
            rng = np.random.default_rng(11)  # the same updates for both tables
            versions = np.ones(args.keys, dtype=np.int64)  # what each key must read as
            updates = []
            background = (Background(spark, tables, name, config.maintenance, commit_positions)
                          if name == "b.maintained" else None)
            results: list[CommitResult] = []
            reads[name] = {}
            writing = 0.0
            next_commit = time.monotonic()
            for commit in range(1, args.commits + 1):
                if background is not None:
                    # Paced from one commit to the next; a read in between takes from the wait.
                    time.sleep(max(0.0, next_commit - time.monotonic()))
                    next_commit = time.monotonic() + args.commit_every
                ids = np.sort(rng.choice(args.keys, args.updates, replace=False))
                updates.append(ids)
                position += args.updates
                started = time.perf_counter()
                offsets = write(tables, writer, committer, name, rows(ids, commit + 1), position, offsets, results)
                writing += time.perf_counter() - started
                versions[ids] = commit + 1
                expected = (args.keys, int(versions.sum()))
                if background is not None:
                    background.poke(commit, args.look_every)
                if commit in CHECKPOINTS:
                    if background is not None:
                        time.sleep(args.read_delay)
                        background.watch()
                        now = stats_from_java(TableActions(spark, tables.get(name).java))
                        shape[commit] = f"{now.data_files}/{now.delete_files}/{now.manifests}"
                    if background is not None:  # read as the one-commit table is: the median of three
                        spark_s, got = median_of_3(lambda: read_spark(spark, "b.maintained"))
                        duck_s, duck_got = median_of_3(
                            lambda: read_duckdb(warehouse / "b" / "maintained", args.duckdb_limit))
                    else:  # seconds to minutes a read, and not what the target compares
                        spark_s, got = read_spark(spark, name)
                        duck_s, duck_got = read_duckdb(warehouse / "b" / "plain", args.duckdb_limit)
                    if background is not None:
                        during[commit] = ", ".join(sorted(background.seen)) or "nothing"
                    assert got == expected and duck_got in (None, expected), (name, commit, got, duck_got, expected)
                    reads[name][commit] = (spark_s, duck_s)
                elif background is not None and commit > args.commits - args.tail_reads:
                    time.sleep(args.read_delay)
                    background.watch()
                    spark_s, got = read_spark(spark, name)
                    duck_s, duck_got = read_duckdb(warehouse / "b" / "maintained", args.duckdb_limit)
                    assert got == expected and duck_got in (None, expected), (commit, got, duck_got, expected)
                    tail.append((spark_s, duck_s, not background.seen))
            rates[name] = args.commits * args.updates / writing
            carried[name] = sum(r.equality_deletes > 0 for r in results)
            commit_s[name] = float(np.median([r.seconds for r in results]))
            if background is not None:
                # The stream stops: the run under way ends, and one more look finds what is left.
                background.join()
                background.poke(args.commits + args.look_every)
                background.join()
                spark_s, got = median_of_3(lambda: read_spark(spark, "b.maintained"))
                duck_s, duck_got = median_of_3(lambda: read_duckdb(warehouse / "b" / "maintained", args.duckdb_limit))
                assert got == expected and duck_got in (None, expected), ("at rest", got, duck_got, expected)
                reads["at rest"] = {args.commits: (spark_s, duck_s)}
                table = tables.get(name).java
                table.refresh()
                at_rest = stats_from_java(TableActions(spark, table)).describe()
        assert background is not None
        # The final rows again: each key at the version of its last update, in one commit.
        final_version = np.ones(args.keys, dtype=np.int64)
        for commit, ids in enumerate(updates, start=2):
            final_version[ids] = commit
        single = pa.concat_tables([rows(np.flatnonzero(final_version == v), int(v))
                                   for v in np.unique(final_version)])
        write(tables, writer, committer, "b.single", single, 1, {})
        best = (median_of_3(lambda: read_spark(spark, "b.single"))[0],
                median_of_3(lambda: read_duckdb(warehouse / "b" / "single", args.duckdb_limit))[0])

        print(f"{'full read after N commits':28}{'Spark plain':>12}{'maintained':>12}{'DuckDB plain':>14}"
              f"{'maintained':>12}   maintained table: data/delete files/manifests, maintenance during the reads")
        for commit in CHECKPOINTS:
            if commit in reads["b.plain"]:
                (sp, dp), (sm, dm) = reads["b.plain"][commit], reads["b.maintained"][commit]
                print(f"  {commit:>4} commits{'':16}{sp:>11.2f}s{sm:>11.2f}s{_s(dp, args.duckdb_limit):>14}"
                      f"{_s(dm, args.duckdb_limit):>12}   {shape[commit]:>9}, {during[commit]}")
        print(f"  same rows in one commit{'':4}{best[0]:>11.2f}s{'':>12}{_s(best[1], args.duckdb_limit):>14}"
              "   (median of 3)")
        rest_spark, rest_duck = reads["at rest"][args.commits]
        print(f"  maintained, once the stream stopped and maintenance ran again (median of 3): {rest_spark:.2f}s "
              f"(Spark), {_s(rest_duck, args.duckdb_limit)} (DuckDB)\n  the maintained table then: {at_rest}")
        last = max(reads["b.maintained"])
        print(f"\nmaintained / one commit after {last} commits: Spark {reads['b.maintained'][last][0] / best[0]:.2f}x, "
              f"DuckDB {reads['b.maintained'][last][1] / best[1]:.2f}x; at rest: Spark {rest_spark / best[0]:.2f}x, "
              f"DuckDB {rest_duck / best[1]:.2f}x")
        quiet = [t for t in tail if t[2]]
        for label, column, baseline in (("Spark", 0, best[0]), ("DuckDB", 1, best[1])):
            for which, chosen in (("all", tail), ("no maintenance step under way", quiet)):
                if not chosen:
                    continue
                ratio = np.array([t[column] for t in chosen]) / baseline
                print(f"{label}, once after each of the maintained table's last {args.tail_reads} commits but "
                      f"the checkpoints, {which} "
                      f"({len(chosen)}): median {np.median(ratio):.2f}x, 90th percentile "
                      f"{np.percentile(ratio, 90):.2f}x, worst {ratio.max():.2f}x of the one-commit read; "
                      f"{int((ratio <= 2).sum())} within twice it")
        print(f"write and commit path: {rates['b.plain']:,.0f} records/s without maintenance, "
              f"{rates['b.maintained']:,.0f} with ({background.runs} maintenance runs beside it)")
        print(f"commits carrying equality deletes: {carried['b.plain']} of {args.commits} without maintenance, "
              f"{carried['b.maintained']} of {args.commits} with; the median commit took "
              f"{commit_s['b.plain']:.3f}s without, {commit_s['b.maintained']:.3f}s with")
        if background.errors:
            print(f"maintenance errors: {background.errors}")
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
