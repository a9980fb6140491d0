"""What Iceberg itself costs per table, before any of tabletopic's work: the floor under many tables.

Each table a sink feeds costs, per round, at least Iceberg's own commit: a manifest, a manifest list
and a new ``metadata.json``, each written and read back. With a table per topic that cost is paid
once per topic per round, so it bounds how fast a thousand topics can go on a given machine.

For each catalog, in a JVM of its own started as the daemon starts it (the daemon's Spark
defaults: local mode, 1 GiB heap), this creates ``--tables`` tables and commits one data file to
each (a ``RowDelta``, as the sink commits), then ``--warm-rounds`` more commits of one file each.
The files are never opened: a commit reads none of its data files, so what is measured is the
catalog's and Iceberg's work alone. It reads the JVM's CPU-seconds (every thread: its compilers
and collectors too) from ``/proc`` around each step:

* ``hadoop``: the hadoop catalog on a local directory, as in ``bench/many_tables.py``;
* ``memory``: Iceberg's in-memory catalog and file IO, with no file system at all: the least any
  catalog can cost.

py4j's own cost per call is measured in the same JVM and taken out. The baseline, in the same run,
is what a user could write instead without a JVM: pyiceberg creating each table in a SQLite
catalog on local files and appending one row to it, twice (its CPU-seconds, the Parquet writes
included: pyiceberg's ``append`` takes rows, not files).

    python bench/iceberg_commit_floor.py [--tables 1000] [--warm-rounds 2] [--catalog hadoop|memory]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_SCHEMA_JSON = json.dumps({"type": "struct", "schema-id": 0, "fields": [
    {"id": 1, "name": "id", "required": False, "type": "long"},
    {"id": 2, "name": "payload", "required": False, "type": "string"}]})
_PY4J_PROBE_CALLS = 5000


def _jvm_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _child(kind: str, tables: int, warm_rounds: int, workdir: str) -> dict[str, float]:
    """One JVM, cold: the figures of one catalog, in ms of JVM CPU a table."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "daemon"))
    from tabletopic.write.spark_session import SparkRuntime

    runtime = SparkRuntime({})
    jvm = runtime.jvm
    pid = runtime.jvm_pid()
    assert pid is not None
    iceberg = jvm.org.apache.iceberg
    ident = iceberg.catalog.TableIdentifier
    if kind == "memory":
        catalog = iceberg.inmemory.InMemoryCatalog()
        props = jvm.java.util.HashMap()
        props.put("warehouse", "memory://warehouse")
        catalog.initialize("floor", props)
        catalog.createNamespace(ident.parse("floor.t").namespace())
    else:
        hadoop_conf = runtime.session.sparkContext._jsc.hadoopConfiguration()
        catalog = iceberg.hadoop.HadoopCatalog(hadoop_conf, "file:" + workdir)
    schema = iceberg.SchemaParser.fromJson(_SCHEMA_JSON)
    spec = iceberg.PartitionSpec.unpartitioned()

    probe = jvm.java.lang.StringBuilder()
    before = _jvm_cpu(pid)
    for _ in range(_PY4J_PROBE_CALLS):
        probe.length()
    py4j_ms = (_jvm_cpu(pid) - before) / _PY4J_PROBE_CALLS * 1e3

    def commit_all(handles: list, round_no: int) -> float:
        # About ten py4j calls a table: the builder, its four settings, build, newRowDelta, addRows,
        # commit, and py4j's lookup of the static builder.
        calls = 10
        before = _jvm_cpu(pid)
        for i, table in enumerate(handles):
            data_file = (iceberg.DataFiles.builder(spec).withPath(f"{workdir}/never-read-{i}-{round_no}.parquet")
                         .withFileSizeInBytes(1000).withRecordCount(1).withFormat("PARQUET").build())
            table.newRowDelta().addRows(data_file).commit()
        return (_jvm_cpu(pid) - before) / len(handles) * 1e3 - calls * py4j_ms

    before = _jvm_cpu(pid)
    handles = [catalog.createTable(ident.parse(f"floor.t{i:04d}"), schema, spec) for i in range(tables)]
    create_ms = (_jvm_cpu(pid) - before) / tables * 1e3 - py4j_ms * 2
    first_ms = commit_all(handles, 0)
    warm = [commit_all(handles, r) for r in range(1, warm_rounds + 1)]
    return {"py4j_ms": py4j_ms, "create_ms": create_ms, "first_commit_ms": first_ms,
            "warm_commit_ms": min(warm) if warm else float("nan")}


def _pyiceberg(tables: int, workdir: str) -> dict[str, float]:
    """The baseline: pyiceberg, a SQLite catalog on local files, one row appended to each new table."""
    import pyarrow as pa
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog("floor", uri=f"sqlite:///{workdir}/catalog.db", warehouse=f"file://{workdir}")
    catalog.create_namespace("floor")
    row = pa.table({"id": pa.array([1], pa.int64()), "payload": pa.array(["x"], pa.string())})
    start = time.process_time()
    handles = [catalog.create_table(f"floor.t{i:04d}", schema=row.schema) for i in range(tables)]
    created = time.process_time()
    for table in handles:
        table.append(row)
    appended = time.process_time()
    for table in handles:
        table.append(row)
    again = time.process_time()
    return {"create_ms": (created - start) / tables * 1e3, "first_commit_ms": (appended - created) / tables * 1e3,
            "warm_commit_ms": (again - appended) / tables * 1e3}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", type=int, default=1000)
    parser.add_argument("--warm-rounds", type=int, default=2)
    parser.add_argument("--catalog", choices=("hadoop", "memory"), action="append",
                        help="measure only this catalog (repeat); TMPDIR decides where the hadoop warehouse is")
    parser.add_argument("--child", choices=("hadoop", "memory"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        with tempfile.TemporaryDirectory(prefix="commit-floor-") as workdir:
            print(json.dumps(_child(args.child, args.tables, args.warm_rounds, workdir)))
        return

    print(f"{args.tables} tables, one data file committed to each, {args.warm_rounds} warm rounds after; "
          f"{os.cpu_count()} cores\n")
    print("| | create, ms CPU a table | first commit (cold JVM) | a warm commit | 1,000 tables' first round, CPU-s |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for kind in args.catalog or ("hadoop", "memory"):
        out = subprocess.run([sys.executable, __file__, "--child", kind, "--tables", str(args.tables),
                              "--warm-rounds", str(args.warm_rounds)],
                             capture_output=True, text=True, check=True)
        figures = json.loads(out.stdout.strip().splitlines()[-1])
        # ms a table, times 1,000 tables, is CPU-seconds.
        first_round = figures["create_ms"] + figures["first_commit_ms"]
        print(f"| Iceberg in the JVM, {kind} catalog | {figures['create_ms']:.1f} | {figures['first_commit_ms']:.1f} | "
              f"{figures['warm_commit_ms']:.1f} | {first_round:.1f} |")
    with tempfile.TemporaryDirectory(prefix="commit-floor-") as workdir:
        base = _pyiceberg(args.tables, workdir)
    first_round = base["create_ms"] + base["first_commit_ms"]
    print(f"| baseline: pyiceberg, SQLite catalog, one row appended | {base['create_ms']:.1f} | "
          f"{base['first_commit_ms']:.1f} | {base['warm_commit_ms']:.1f} | {first_round:.1f} |")
    print(f"\npy4j's own JVM CPU per call ({figures['py4j_ms'] * 1e3:.0f} µs in the last JVM) is taken out of "
          "the JVM's figures; the pyiceberg figures are its Python process's CPU.")


if __name__ == "__main__":
    main()
