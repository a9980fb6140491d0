"""What the checks before Arrow's JSON reader cost: the nesting bound and the UTF-8 check, per record.

Builds N plain JSON values (default 500,000, the 7-field clickstream records of
bench/e2e_throughput.py, about 130 bytes each) and times, in the same run, over batches
of 10,000 (a fetch):

* baseline: JsonConverter's conversion with the checks left out (what it did before them);
* tabletopic: JsonConverter.convert as the sink calls it, checks included;
* the checks alone, and the same over values 1 KiB long (longer than the nesting bound, so
  their brackets are counted).

    python bench/input_guard.py [--records 500000] [--batch 10000]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable

from tabletopic.convert.input_guard import not_utf8, too_deep
from tabletopic_plugins.converters import json_converter
from tabletopic_plugins.converters.json_converter import JsonConverter


def records(n: int, pad: int = 0) -> list[bytes]:
    rng = random.Random(7)
    pages = ["/", "/cart", "/item/42", "/search?q=boots", "/checkout"]
    out = []
    for i in range(n):
        value = {"id": i, "user": f"u{rng.randrange(10_000)}", "page": rng.choice(pages),
                 "ms": rng.randrange(5_000), "price": round(rng.random() * 100, 2),
                 "country": rng.choice(["FR", "DE", "US", "JP"]), "at": "2026-11-26T10:00:00.000Z"}
        if pad:
            value["note"] = "x" * pad
        out.append(json.dumps(value, separators=(",", ":")).encode())
    return out


def best_of(runs: int, work: Callable[[], object]) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--batch", type=int, default=10_000)
    args = parser.parse_args()
    converter = JsonConverter()
    converter.configure({"schemas.enable": "false"}, is_key=False)
    for label, values in (("130-byte values", records(args.records)),
                          ("1 KiB values", records(args.records // 5, pad=900))):
        batches = [values[i:i + args.batch] for i in range(0, len(values), args.batch)]
        size = sum(map(len, values))

        def unguarded(batches: list[list[bytes]] = batches) -> None:
            for batch in batches:
                json_converter._convert_schemaless(batch)

        def guarded(batches: list[list[bytes]] = batches) -> None:
            for batch in batches:
                converter.convert("bench", batch)

        def checks(batches: list[list[bytes]] = batches) -> None:
            for batch in batches:
                not_utf8(batch)
                too_deep(batch, 1000)

        base, full, alone = best_of(3, unguarded), best_of(3, guarded), best_of(3, checks)
        n = len(values)
        print(f"{label}: {n:,} records, {size / 2**20:.1f} MiB, batches of {args.batch:,}, best of 3")
        print(f"  baseline (no checks)   {n / base:>12,.0f} records/s  {base / n * 1e6:6.2f} µs/record")
        print(f"  tabletopic (checked)   {n / full:>12,.0f} records/s  {full / n * 1e6:6.2f} µs/record")
        print(f"  the checks alone       {n / alone:>12,.0f} records/s  {alone / n * 1e6:6.2f} µs/record "
              f"({alone / full:.0%} of the checked conversion)")


if __name__ == "__main__":
    main()
