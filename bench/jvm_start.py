"""A daemon's start, from launch to its first commit, with the JVM's class archive and without it.

Each run starts ``tabletopic standalone`` as a user does, with a new connector on a topic that holds
1,000 records, and times it from the launch to the snapshot that commits them; at that moment it reads
the CPU the daemon and its Spark JVM have used. Runs alternate between ``tabletopic.spark.class-archive``
true and false (the baseline: the JVM as Spark starts it). The first start with the archive on writes
it as its JVM exits, so it is run once before the timed runs, and not counted.

    python bench/jvm_start.py [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from e2e_throughput import cpu_seconds, java_child
from scale_out import committed, produce, props
from tabletopic.demo.broker import EmbeddedBroker, create_topic

RECORDS = 1_000
PARTITIONS = 6  # scale_out's producer spreads its records over six


def start(run: int, archive: bool, bootstrap: str, topic: str, warehouse: Path,
          work: Path) -> tuple[float, float, float]:
    """Seconds to the first commit, and the CPU seconds of the daemon and of its JVM by then."""
    name = f"start{run}"
    home = work / name
    home.mkdir()
    connector = {"name": name, "topics": topic, "iceberg.tables": f"bench.{name}",
                 "value.converter.schemas.enable": "false", "iceberg.tables.auto-create-enabled": "true",
                 "iceberg.control.commit.interval-ms": 1000, "iceberg.catalog.type": "hadoop",
                 "iceberg.catalog.warehouse": f"file://{warehouse}"}
    worker = {"bootstrap.servers": bootstrap, "listeners": "", "log.format": "json", "spark.master": "local[2]",
              "spark.driver.memory": "1g", "tabletopic.spark.class-archive": str(archive).lower()}
    table_dir, group = warehouse / "bench" / name, f"connect-{name}"
    launched = time.monotonic()
    with open(home / "daemon.log", "wb") as log:
        command = [sys.executable, "-m", "tabletopic.cli", "standalone", str(props(home / "w.properties", worker)),
                   str(props(home / "c.properties", connector))]
        proc = subprocess.Popen(command, cwd=home, stdout=log, stderr=subprocess.STDOUT)
    try:
        while committed(table_dir, group) < RECORDS:
            if proc.poll() is not None or time.monotonic() - launched > 300:
                raise SystemExit(f"no commit of {RECORDS} records; see {home / 'daemon.log'}")
            time.sleep(0.05)
        seconds = time.monotonic() - launched
        jvm = java_child(proc.pid)
        return seconds, cpu_seconds(proc.pid), cpu_seconds(jvm) if jvm is not None else float("nan")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)
        time.sleep(2)  # the JVM exits after its daemon: let it go before the next start is timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="timed starts of each kind")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tabletopic-jvm-start-"))
    try:
        with EmbeddedBroker(log_path=work / "broker.log") as broker:
            topic = "starts"
            asyncio.run(create_topic(broker.bootstrap_servers, topic, PARTITIONS))
            asyncio.run(produce(broker.bootstrap_servers, topic, 0, RECORDS))
            warehouse = work / "warehouse"
            start(0, True, broker.bootstrap_servers, topic, warehouse, work)  # writes the archive, if none is there yet
            figures: dict[bool, list[tuple[float, float, float]]] = {True: [], False: []}
            for run in range(1, 2 * args.runs + 1):
                archive = run % 2 == 0
                wall, daemon, jvm = start(run, archive, broker.bootstrap_servers, topic, warehouse, work)
                figures[archive].append((wall, daemon, jvm))
                print(f"run {run}: archive {'on ' if archive else 'off'}  first commit {wall:5.1f} s  "
                      f"daemon CPU {daemon:5.1f} s  JVM CPU {jvm:5.1f} s", flush=True)
        print(f"\nmedians of {args.runs} starts each, to the first commit of {RECORDS:,} records (2 cores):")
        for archive, label in ((False, "without the archive (baseline)"), (True, "with the class archive")):
            wall, daemon, jvm = (statistics.median(f[i] for f in figures[archive]) for i in range(3))
            print(f"  {label:32s} {wall:5.1f} s   daemon CPU {daemon:5.1f} s   JVM CPU {jvm:5.1f} s")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
