"""Where the daemon's Python time goes per record, from a py-spy raw profile (``e2e_throughput.py --py-spy``).

Each sample's stack is given to the first phase whose marker it holds (a function name), so a
sample in the JSON reader called from staging counts as convert, not as staging. The shares of
the busy samples are spread over the Python CPU-seconds of the same run, and divided by its
records: microseconds per record. Samples of a thread waiting for the GIL count as busy, so read
the figures as shares of the work, not as exact CPU.

    python bench/profile_summary.py PROFILE --records N --cpu PYTHON_CPU_SECONDS
"""

from __future__ import annotations

import argparse
import collections
import re

# (phase, markers): the first phase with a marker on the stack takes the sample.
PHASES: list[tuple[str, tuple[str, ...]]] = [
    ("decode fetched records (aiokafka, Faust's consumer thread)", ("fetch_raw", "_unpack_records", "Fetcher.")),
    ("convert (guards, JSON to Arrow)", ("JsonConverter.", "Staging._convert", "input_guard")),
    ("stage the rest (sizes, transforms, routing)", ("Staging.", "payload_sizes")),
    ("take (continuity, RawRecords columns)", ("RecordTaking.take", "fetch_bytes")),
    ("buffer (conform, table buffers)", ("SinkWriter.buffer", "SinkWriter.prepare", "TableBuffer.", "conform")),
    ("hand-off and writes (py4j)", ("FileWriter.", "SparkRuntime.", "JavaMember", "send_command")),
    ("commit protocol (worker, coordinator, channel)", ("tabletopic/commit/",)),
    ("metrics", ("SinkMetrics.", "prometheus_client")),
    ("garbage collection", ("<gc>",)),
]
OTHER = "event loop, Faust and the rest"
# Where threads wait: selectors, py4j's finalizer, the JVM log relay, an idle pool worker, a thread's bare frame.
IDLE = re.compile(r"select \(selectors\.py|FinalizerWorker\.run|relay_lines\.<locals>\.pump|"
                  r"_worker \(concurrent/futures/thread\.py:81\)|^thread \(\d+\)$")


def phase_of(stack: str) -> str:
    for phase, markers in PHASES:
        if any(m in stack for m in markers):
            return phase
    return OTHER


def summarise(path: str) -> tuple[collections.Counter[str], int]:
    counts: collections.Counter[str] = collections.Counter()
    total = 0
    for line in open(path):  # noqa: SIM115 - read once, line by line
        stack, _, n = line.rstrip().rpartition(" ")
        if not n.isdigit():
            continue
        frames = stack.split(";")
        # A thread blocked in a call py-spy does not know as idle is not work either.
        if frames and IDLE.search(frames[-1]):
            continue
        counts[phase_of(stack)] += int(n)
        total += int(n)
    return counts, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("profile")
    parser.add_argument("--records", type=int, required=True)
    parser.add_argument("--cpu", type=float, required=True, help="the run's Python CPU-seconds")
    args = parser.parse_args()
    counts, total = summarise(args.profile)
    per_record = 1e6 * args.cpu / args.records
    print(f"{'phase':58}{'share':>8}{'µs/record':>11}")
    for phase, n in counts.most_common():
        print(f"{phase:58}{n / total:>8.1%}{per_record * n / total:>11.2f}")
    print(f"{'all Python':58}{1:>8.0%}{per_record:>11.2f}")


if __name__ == "__main__":
    main()
