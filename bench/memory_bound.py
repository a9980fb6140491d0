"""Memory under back-pressure: ten times tabletopic.buffer.max-bytes waiting in the topic.

Produces about ``--backlog-mib`` of JSON to a 4-partition topic, then runs ``tabletopic
standalone`` (a child process, with its Spark driver JVM) with a 10-minute commit interval, so
that only the memory bound can make it commit early.  It samples the RSS of the daemon's
Python process and of its JVM every 0.2 s until commits stop for 15 s (what is left then
fits the bound) and its RSS settles, stops it with SIGTERM, and checks that every record was
committed.

Two runs in one invocation: the bound at a tenth of the backlog, and a baseline whose
bound is above the whole backlog.

    python bench/memory_bound.py [--backlog-mib 160] [--spark-memory 1g]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from aiokafka import AIOKafkaProducer

from tabletopic.demo.broker import EmbeddedBroker, create_topic
from tabletopic.offsets.source_offsets import decode, offsets_key

TOPIC, PARTITIONS, TABLE = "bench_memory", 4, "bench.memory"


async def produce(bootstrap: str, target_bytes: int) -> tuple[int, int]:
    await create_topic(bootstrap, TOPIC, PARTITIONS)
    rng = random.Random(2)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=False,
                                linger_ms=20, max_batch_size=512 * 1024)
    await producer.start()
    total = n = 0
    pending = []
    while total < target_bytes:
        value = json.dumps({"id": n, "user": f"u{rng.randrange(10**6):07d}", "amount": rng.random() * 1000,
                            "note": f"{rng.getrandbits(128):032x}{rng.getrandbits(128):032x}"}).encode()
        total += len(value)
        pending.append(await producer.send(TOPIC, value, partition=n % PARTITIONS))
        n += 1
        if len(pending) >= 20_000:
            await asyncio.gather(*pending)
            pending.clear()
    await asyncio.gather(*pending)
    await producer.stop()
    return n, total


def rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, stack = [], [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            out.append(child)
            stack.append(child)
    return out


def committed(warehouse: Path, group: str) -> int:
    """Sum of the offsets the newest snapshot records, read from the metadata JSON (no JVM here)."""
    meta = sorted((warehouse / "bench" / "memory" / "metadata").glob("v*.metadata.json"),
                  key=lambda p: int(p.name[1:].split(".")[0])) if (warehouse / "bench").exists() else []
    if not meta:
        return 0
    doc = json.loads(meta[-1].read_text())
    for snap in sorted(doc.get("snapshots", []), key=lambda s: s["sequence-number"], reverse=True):
        text = snap.get("summary", {}).get(offsets_key(group))
        if text:
            return sum(decode(text).values())
    return 0


def run(work: Path, bootstrap: str, records: int, bound: int, spark_memory: str) -> dict[str, float]:
    warehouse = work / f"wh-{bound}"
    name = f"mem-{bound}"
    (work / "worker.properties").write_text(
        f"bootstrap.servers={bootstrap}\nvalue.converter.schemas.enable=false\nlisteners=\n"
        f"spark.driver.memory={spark_memory}\nspark.master=local[2]\nlog.level=INFO\n")
    (work / f"{name}.properties").write_text(
        f"name={name}\ntopics={TOPIC}\niceberg.tables={TABLE}\niceberg.tables.auto-create-enabled=true\n"
        f"iceberg.control.commit.interval-ms=600000\ntabletopic.buffer.max-bytes={bound}\n"
        f"iceberg.catalog.type=hadoop\niceberg.catalog.warehouse=file://{warehouse}\n")
    with open(work / f"{name}.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "tabletopic.cli", "standalone", str(work / "worker.properties"),
                                 str(work / f"{name}.properties")], stdout=log, stderr=subprocess.STDOUT, cwd=work)
    peak_py = peak_jvm = peak_total = 0.0
    started = time.monotonic()
    last, changed = 0, time.monotonic()
    last_state: tuple[int, int] = (-1, -1)
    try:
        # Only memory pressure commits (the interval is 10 minutes). Once neither the offsets nor
        # the RSS move for 15 s, everything is read and what is left fits the bound: SIGTERM's last
        # barrier commits it.
        while time.monotonic() - changed < 15:
            if proc.poll() is not None:
                raise RuntimeError(f"the daemon exited with {proc.returncode}; see {work / (name + '.log')}")
            py = rss_mib(proc.pid)
            jvm = sum(rss_mib(p) for p in descendants(proc.pid))
            peak_py, peak_jvm, peak_total = max(peak_py, py), max(peak_jvm, jvm), max(peak_total, py + jvm)
            now = committed(warehouse, f"connect-{name}")
            state = (now, round((py + jvm) / 25))  # consuming grows the RSS; committing moves the offsets
            if state != last_state or time.monotonic() - started < 30:
                last_state, changed = state, time.monotonic()
            last = now
            if time.monotonic() - started > 1800:
                raise RuntimeError("no progress within 30 minutes")
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=180)
    final = committed(warehouse, f"connect-{name}")
    if code != 0 or final != records:
        raise RuntimeError(f"exit code {code}, {final:,} of {records:,} records committed")
    pauses = (work / f"{name}.log").read_text(errors="replace").count('"reason": "pressure"')
    return {"python": peak_py, "jvm": peak_jvm, "total": peak_total, "seconds": time.monotonic() - started,
            "pauses": pauses, "before_stop": last}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backlog-mib", type=int, default=160)
    parser.add_argument("--spark-memory", default="1g")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tabletopic-memory-"))
    try:
        with EmbeddedBroker(log_path=work / "broker.log") as broker:
            records, nbytes = asyncio.run(produce(broker.bootstrap_servers, args.backlog_mib << 20))
            bound = nbytes // 10
            results = [(f"bound {bound >> 20} MiB (a tenth)", run(work, broker.bootstrap_servers, records, bound,
                                                                 args.spark_memory)),
                       (f"bound {(nbytes * 4) >> 20} MiB (baseline)",
                        run(work, broker.bootstrap_servers, records, nbytes * 4, args.spark_memory))]
        print(f"\n{records:,} JSON records, {nbytes / (1 << 20):.0f} MiB of values in the topic, "
              f"spark.driver.memory={args.spark_memory}, commit interval 10 min\n")
        print(f"{'':28}{'peak Python MiB':>16}{'peak JVM MiB':>14}{'peak total':>12}{'early':>8}{'seconds':>9}")
        for label, r in results:
            print(f"{label:28}{r['python']:>16.0f}{r['jvm']:>14.0f}{r['total']:>12.0f}{r['pauses']:>8.0f}"
                  f"{r['seconds']:>9.1f}")
        print("\nevery record committed in both runs (checked after the last barrier); before SIGTERM: "
              + ", ".join(f"{int(r['before_stop']):,}" for _, r in results))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
