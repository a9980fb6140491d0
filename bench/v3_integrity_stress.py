"""Does a v3 upsert table ever name a file that is gone? The SIGKILL scenario, repeated under contention.

Each run is ``tests/test_upsert.py``'s v3 scenario made harder: a format-version 3 upsert and CDC table
keyed on ``id`` and partitioned by day, 300 keys, then phases of random changes sent in slices a
second or two apart once the daemon has made its first commit (so that it commits round after round,
every round merging deletion vectors), two of every three phases with a SIGKILL of the daemon at a random slice. Its own
maintenance looks every ``--look-ms`` (compaction at two deletion vectors, equality deletes
converted, snapshots expired), and each commit expires the oldest snapshots past
``--max-snapshots``, so every path that deletes a file runs. ``--parallel`` runs go at once, each
with its own daemon and JVM, beside ``--hogs`` processes that keep the cores busy, as the suite's
other workers do.

After every phase the table's head snapshot is checked file by file (``tabletopic verify``'s check, no
JVM): a missing file ends that run as a failure and keeps its directory (the daemons' logs and the
warehouse), and the row count DuckDB reads is compared with the model. It stops after ``--runs`` runs, or at the
first failure with ``--stop-on-missing``, and prints the runs, the failures and their rate.

    python bench/v3_integrity_stress.py [--runs 30] [--parallel 3] [--hogs 1] [--phases 6]
        [--look-ms 3000] [--max-snapshots 12] [--stop-on-missing] [--keep]
"""

from __future__ import annotations

import argparse
import multiprocessing
import random
import shutil
import sys
import tempfile
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the tests' scenario model

from tests.support import (
    DaemonProcess,
    create_topic,
    duckdb_connection,
    produce,
    unique,
    worker_props,
)
from tests.upsert_model import PARTITIONS, Model, seed

from tabletopic.config.connector import parse_connector
from tabletopic.config.worker import parse_worker
from tabletopic.demo.broker import EmbeddedBroker
from tabletopic.ops.table_integrity import check_table
from tabletopic.write.pyiceberg_catalog import open_table

TABLE = "cdc.accounts_v3"
CHANGES, SLICES = 3000, 12  # per phase


@dataclass
class RunResult:
    number: int
    phases: int
    missing: list[str]
    wrong_rows: str | None
    workdir: Path
    seconds: float


def _connector(name: str, topic: str, warehouse: Path, look_ms: int, max_snapshots: int) -> dict[str, str]:
    return {
        "name": name, "topics": topic, "iceberg.tables": TABLE,
        "iceberg.catalog.type": "hadoop", "iceberg.catalog.warehouse": f"file://{warehouse}",
        "value.converter.schemas.enable": "false", "iceberg.tables.auto-create-enabled": "true",
        "iceberg.tables.auto-create-props.format-version": "3",
        "iceberg.tables.default-id-columns": "id", "iceberg.tables.upsert-mode-enabled": "true",
        "iceberg.tables.cdc-field": "op", "iceberg.tables.default-partition-by": "day(updated_at)",
        "iceberg.control.commit.interval-ms": "1000",
        "tabletopic.maintenance.enabled": "true",
        "tabletopic.maintenance.interval-ms": str(look_ms),
        "tabletopic.maintenance.compaction.delete-files": "2",
        "tabletopic.maintenance.compaction.min-input-files": "4",
        "tabletopic.maintenance.snapshots.older-than-ms": "0",
        "tabletopic.maintenance.snapshots.retain-last": "3",
        "tabletopic.maintenance.snapshots.max-count": str(max_snapshots),
        "tabletopic.maintenance.orphans.older-than-ms": "3600000",
        "tabletopic.maintenance.orphans.interval-ms": "5000",
    }


def _committed(config: object, table: str, group: str) -> int:
    from tabletopic.offsets.source_offsets import PyIcebergTable, recorded_in
    try:
        return sum(recorded_in(PyIcebergTable(open_table(config, table)), None, group).offsets.values())
    except Exception:  # not created yet, or mid-commit
        return -1


def wait_committed(config: object, group: str, model: Model, daemon: DaemonProcess, what: str) -> None:
    deadline = time.monotonic() + 300
    while _committed(config, TABLE, group) != model.produced:
        if time.monotonic() > deadline or not daemon.alive():
            raise RuntimeError(f"{what}: not committed (daemon alive: {daemon.alive()})")
        time.sleep(0.2)


def one_run(number: int, bootstrap: str, root: Path, args: argparse.Namespace) -> RunResult:
    started = time.monotonic()
    work = root / f"run{number:03}"
    work.mkdir()
    topic = unique("v3stress")
    create_topic(bootstrap, topic, PARTITIONS)
    connector = _connector(unique("v3stress"), topic, work / "warehouse", args.look_ms, args.max_snapshots)
    worker = worker_props(bootstrap)
    config = parse_connector(connector, parse_worker(worker))
    group = f"connect-{connector['name']}"
    model = Model(seed=1000 + number, keys=300)
    rng = random.Random(number)
    daemon = DaemonProcess(work, worker, [connector])
    seed(bootstrap, topic, model)
    missing: list[str] = []
    wrong: str | None = None
    phase = 0
    try:
        for phase in range(args.phases):
            daemon.start()
            produce(bootstrap, topic, model.changes(CHANGES // SLICES))
            wait_committed(config, group, model, daemon, f"run {number} phase {phase} start")
            kill_at = rng.randrange(1, SLICES) if phase % 3 != 1 else -1
            for slice_number in range(1, SLICES):
                if slice_number == kill_at:
                    daemon.kill()
                    daemon.start()
                produce(bootstrap, topic, model.changes(CHANGES // SLICES))
                time.sleep(rng.uniform(0.3, 2.0))
            wait_committed(config, group, model, daemon, f"run {number} phase {phase}")
            # Maintenance may be between steps: let a look or two act on the committed table first.
            time.sleep(rng.uniform(0, 2 * args.look_ms / 1000))
            daemon.kill()
            report = check_table(open_table(config, TABLE), TABLE)
            if not report.intact:
                missing = [p.describe() for p in report.problems]
                break
            location = str(work / "warehouse" / "cdc" / "accounts_v3")
            rows = duckdb_connection().execute(f"SELECT count(*) FROM iceberg_scan('{location}')").fetchone()[0]
            if rows != len(model.rows):
                wrong = f"phase {phase}: {rows} rows, the model holds {len(model.rows)}"
                break
    finally:
        if daemon.alive():
            daemon.kill()
    result = RunResult(number, phase + 1, missing, wrong, work, time.monotonic() - started)
    if not missing and not wrong and not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return result


def _hog(stop: threading.Event) -> None:
    while not stop.is_set():
        sum(i * i for i in range(200_000))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--parallel", type=int, default=3)
    parser.add_argument("--hogs", type=int, default=1, help="processes that keep a core busy meanwhile")
    parser.add_argument("--phases", type=int, default=6)
    parser.add_argument("--look-ms", type=int, default=3000, help="tabletopic.maintenance.interval-ms")
    parser.add_argument("--max-snapshots", type=int, default=12, help="tabletopic.maintenance.snapshots.max-count")
    parser.add_argument("--stop-on-missing", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep every run's directory, not only failed ones")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="v3stress-"))
    stop = multiprocessing.Event()
    hogs = [multiprocessing.Process(target=_hog, args=(stop,), daemon=True) for _ in range(args.hogs)]
    for hog in hogs:
        hog.start()
    results: list[RunResult] = []
    errors = 0
    try:
        with EmbeddedBroker(log_path=root / "tansu.log") as broker, ThreadPoolExecutor(args.parallel) as pool:
            pending = {pool.submit(one_run, n, broker.bootstrap_servers, root, args) for n in range(args.runs)}
            for future in as_completed(pending):
                try:
                    result = future.result()
                except Exception:
                    errors += 1
                    print(f"a run did not complete:\n{traceback.format_exc()}", flush=True)
                    continue
                results.append(result)
                verdict = ("MISSING FILES" if result.missing else "WRONG ROWS" if result.wrong_rows else "intact")
                print(f"run {result.number}: {result.phases} phases, {verdict}, {result.seconds:.0f}s", flush=True)
                for line in result.missing:
                    print(f"    {line}", flush=True)
                if result.wrong_rows:
                    print(f"    {result.wrong_rows}", flush=True)
                if result.missing or result.wrong_rows:
                    print(f"    kept: {result.workdir}", flush=True)
                    if args.stop_on_missing:
                        for other in pending:
                            other.cancel()
                        break
    finally:
        stop.set()
        for hog in hogs:
            hog.join(timeout=5)
    bad = [r for r in results if r.missing]
    phases = sum(r.phases for r in results)
    print(f"\n{len(results)} runs ({phases} phases checked, {errors} runs did not complete): "
          f"{len(bad)} with missing files ({len(bad) / max(1, len(results)):.1%} of runs), "
          f"{sum(1 for r in results if r.wrong_rows)} with wrong rows")
    if not bad and not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
