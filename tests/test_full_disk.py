"""The disk the tables are written to fills up: writes fail, the connector stops taking records, nothing
is dead-lettered, and once space is freed it goes on by itself, every record landing once.

The test mounts a small tmpfs of its own for the warehouse (it needs the right to mount, which CI's
root has; elsewhere it is skipped with the reason).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tabletopic.write.spark_session import SparkRuntime
from tests.support import (
    DaemonProcess,
    Warehouse,
    connector_props,
    create_topic,
    events,
    produce,
    read_topic,
    unique,
    wait_until,
    worker_props,
)

DISK_MB = 48


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_MB}m", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({made.stderr.strip()}); CI runs this as root")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(disk: Path, leave_kb: int) -> Path:
    """A file that takes all of ``disk`` but ``leave_kb``."""
    free = int(subprocess.run(["df", "--output=avail", "-k", str(disk)], capture_output=True, text=True,
                              check=True).stdout.split()[-1])
    filler = disk / "filler"
    subprocess.run(["fallocate", "-l", f"{max(0, free - leave_kb)}k", str(filler)], check=True)
    return filler


@pytest.mark.timeout(420)
@pytest.mark.slow
def test_a_full_disk_stops_the_writes_dead_letters_nothing_and_they_go_on_once_space_is_freed(
        small_disk: Path, bootstrap: str, spark: SparkRuntime, tmp_path: Path) -> None:
    warehouse = Warehouse(spark, small_disk / "warehouse")
    (small_disk / "warehouse").mkdir()
    topic, dlq = unique("disk"), unique("disk_dlq")
    create_topic(bootstrap, topic, 2)
    connector = connector_props("disk", topic, "disk.events", warehouse, {
        "value.converter.schemas.enable": "false", "iceberg.tables.auto-create-enabled": "true",
        "iceberg.control.commit.interval-ms": "1000", "errors.tolerance": "all",
        "errors.deadletterqueue.topic.name": dlq, "errors.deadletterqueue.topic.replication.factor": "1"})
    group = f"connect-{connector['name']}"
    daemon = DaemonProcess(tmp_path, worker_props(bootstrap), [connector]).start()

    def wave(first: int, n: int) -> None:
        produce(bootstrap, topic, [(None, json.dumps({"id": i, "pad": "x" * 200}).encode(), i % 2)
                                   for i in range(first, first + n)])

    def committed() -> int:
        return sum(warehouse.offsets("disk.events", group).values()) if warehouse.exists("disk.events") else 0

    wave(0, 2000)
    wait_until(lambda: committed() == 2000, 180, "the first records committed", daemon)
    filler = _fill(small_disk, leave_kb=8)
    wave(2000, 20_000)
    # By construction: the writes have failed at least twice, and nothing of the second wave counts.
    wait_until(lambda: len(events(daemon, "writing files failed; nothing committed, records will be re-read"))
               + len(events(daemon, "commit failed; the round's answers are read again")) >= 2, 180,
               "the writes to fail on the full disk", daemon)
    assert committed() == 2000
    assert daemon.alive()

    filler.unlink()
    wait_until(lambda: committed() == 22_000, 240, "every record committed once space was freed", daemon)
    assert sorted(r[0] for r in warehouse.rows("disk.events", "id")) == list(range(22_000))
    warehouse.assert_intact("disk.events")
    assert read_topic(bootstrap, dlq, expected=0) == [], "a full disk is the system's fault, never a record's"
    assert daemon.terminate() == 0
