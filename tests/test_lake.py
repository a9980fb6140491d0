"""Tables behind real catalogs: on S3, JDBC on PostgreSQL, SeaweedFS's REST catalog, Glue on moto; on local
files, a Hive Metastore (Hive 2.3, from the pyspark wheel) on PostgreSQL.

In each catalog one daemon runs an append connector and an upsert connector through the
broker, is SIGKILLed mid-stream and restarted.  Both tables must then be exact, read by
Spark through the catalog and by DuckDB (httpfs + iceberg, no JVM) from storage.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tabletopic.demo.hive_metastore import HiveMetastore
from tabletopic.demo.lake_servers import MotoLake, SeaweedLake
from tabletopic.write.spark_session import SparkRuntime
from tests.postgres_server import PostgresServer, postgres_available
from tests.support import (
    DaemonProcess,
    Warehouse,
    create_topic,
    duckdb_connection,
    produce,
    unique,
    wait_until,
    worker_props,
)

PARTITIONS = 4
KEYS = 400


@dataclass
class Lake:
    kind: str
    props: dict[str, str]  # iceberg.catalog.* without the prefix
    duckdb_secret: str
    env: dict[str, str] = field(default_factory=dict)  # the daemon's environment (Glue reads the AWS chain)
    secrets: list[str] = field(default_factory=list)  # must never reach the daemon's log


@pytest.fixture(scope="module", params=["jdbc", "rest", "glue", "hive"])
def lake(request: pytest.FixtureRequest, spark: SparkRuntime,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lake]:
    kind = request.param
    root = tmp_path_factory.mktemp(f"lake-{kind}")
    if kind == "jdbc":
        if not postgres_available():
            pytest.skip("PostgreSQL and its JDBC driver are not installed (.ci/run installs them)")
        with MotoLake(log_path=root / "moto.log") as s3, PostgresServer() as pg:
            yield Lake(kind, {**pg.jdbc_props(), "warehouse": f"s3://{s3.bucket}/wh", **s3.s3_props()},
                       s3.duckdb_secret(), secrets=[pg.password])
    elif kind == "hive":
        if not postgres_available():
            pytest.skip("PostgreSQL and its JDBC driver are not installed (.ci/run installs them)")
        # Local files: the metastore checks a table's location through Hadoop's file systems, and S3A is
        # not among the pyspark wheel's jars (docs/lake.md).
        with PostgresServer() as pg:
            jdbc = pg.jdbc_props()
            with HiveMetastore(f"file://{root}/warehouse", (jdbc["uri"], jdbc["jdbc.user"],
                                                            jdbc["jdbc.password"])) as hms:
                yield Lake(kind, hms.catalog_props(), "SELECT 1", secrets=[pg.password])
    elif kind == "rest":
        with SeaweedLake(root) as weed:
            yield Lake(kind, weed.rest_props(), weed.duckdb_secret(), secrets=[weed.secret_key])
    else:
        with MotoLake(log_path=root / "moto.log") as moto:
            env = moto.glue_environment()
            # The test's own JVM reads Glue too: the SDK's default chain also reads these system properties.
            system = spark.jvm.java.lang.System
            system.setProperty("aws.accessKeyId", env["AWS_ACCESS_KEY_ID"])
            system.setProperty("aws.secretAccessKey", env["AWS_SECRET_ACCESS_KEY"])
            system.setProperty("aws.region", env["AWS_REGION"])
            # And its pyiceberg reads (the verify check) go through boto3, which reads the environment.
            with pytest.MonkeyPatch.context() as patch:
                for key, value in env.items():
                    patch.setenv(key, value)
                yield Lake(kind, moto.glue_props(), moto.duckdb_secret(), env)


def duck_path(location: str) -> str:
    """A metadata location as DuckDB opens it: a local one without Hadoop's ``file:`` scheme."""
    return location.removeprefix("file:") if location.startswith("file:") else location


class Streams:
    """An append stream (every record a row) and an upsert stream (the last value per key)."""

    def __init__(self, bootstrap: str, append_topic: str, upsert_topic: str) -> None:
        self.bootstrap, self.append_topic, self.upsert_topic = bootstrap, append_topic, upsert_topic
        self.rng = random.Random(12)
        self.appended: list[dict[str, int]] = []
        self.current: dict[int, dict[str, int]] = {}
        self.upserts = 0

    def wave(self, n: int, note: bool = False) -> None:
        rows = [{"id": len(self.appended) + i, "amount": self.rng.randrange(10**6),
                 "h": self.rng.randrange(2**31), "ts": f"2026-11-{1 + (len(self.appended) + i) % 28:02d}T12:00:00Z"}
                for i in range(n)]
        if note:  # a field the table does not have yet: the table evolves
            for r in rows:
                r["note"] = f"n{r['id'] % 7}"
        self.appended += rows
        produce(self.bootstrap, self.append_topic,
                [(str(r["id"]).encode(), json.dumps(r).encode(), r["id"] % PARTITIONS) for r in rows])
        changes = []
        for _ in range(n // 2):
            key = self.rng.randrange(KEYS)
            self.upserts += 1
            row = {"id": key, "v": self.rng.randrange(10**6), "seq": self.upserts}
            self.current[key] = row
            changes.append((str(key).encode(), json.dumps(row).encode(), key % PARTITIONS))
        produce(self.bootstrap, self.upsert_topic, changes)

    def expected_append(self) -> tuple[int, int, int, int]:
        return (len(self.appended), len({r["id"] for r in self.appended}), sum(r["h"] for r in self.appended),
                sum(r["amount"] for r in self.appended))


@pytest.mark.slow
def test_append_and_upsert_tables_on_s3_survive_a_sigkill(lake: Lake, bootstrap: str, spark: SparkRuntime,
                                                          tmp_path: Path) -> None:
    append_topic, upsert_topic = unique("lake_append"), unique("lake_upsert")
    for topic in (append_topic, upsert_topic):
        create_topic(bootstrap, topic, PARTITIONS)
    catalog = unique("lake")
    namespace = unique("ns").replace("-", "_")
    tables = {"append": f"{namespace}.events", "upsert": f"{namespace}.accounts"}
    common = {"iceberg.catalog": catalog, **{f"iceberg.catalog.{k}": v for k, v in lake.props.items()},
              "iceberg.tables.auto-create-enabled": "true", "iceberg.control.commit.interval-ms": "1500",
              "value.converter.schemas.enable": "false"}
    connectors = [
        {"name": unique("lake-append"), "topics": append_topic, "iceberg.tables": tables["append"],
         "iceberg.tables.default-partition-by": "day(ts)", "iceberg.tables.evolve-schema-enabled": "true",
         **common},
        {"name": unique("lake-upsert"), "topics": upsert_topic, "iceberg.tables": tables["upsert"],
         "iceberg.tables.default-id-columns": "id", "iceberg.tables.upsert-mode-enabled": "true", **common},
    ]
    groups = {"append": f"connect-{connectors[0]['name']}", "upsert": f"connect-{connectors[1]['name']}"}
    reader = Warehouse(spark, tmp_path, lake.props, name=catalog)
    streams = Streams(bootstrap, append_topic, upsert_topic)
    daemon = DaemonProcess(tmp_path, worker_props(bootstrap), connectors, env=lake.env)

    def committed(which: str) -> int:
        return sum(reader.offsets(tables[which], groups[which]).values())

    def all_committed() -> bool:
        return committed("append") == len(streams.appended) and committed("upsert") == streams.upserts

    daemon.start()
    streams.wave(3000)
    wait_until(lambda: committed("append") > 0 and committed("upsert") > 0, 180, "first commits", daemon)
    # Another writer commits to the table the daemon has loaded: its next commit starts from stale
    # metadata and must be retried on the new state, keeping the foreign row.
    reader.sql(f"INSERT INTO {{c}}.{tables['append']} (id, amount, h, ts) VALUES (-1, 0, 0, TIMESTAMP '2026-11-01')")
    streams.wave(3000)
    time.sleep(random.Random(5).uniform(0.5, 2.0))
    daemon.kill()
    daemon.start()
    streams.wave(3000, note=True)
    wait_until(all_committed, 240, "every record committed after the restart", daemon)
    assert daemon.terminate() == 0, daemon.output()[-3000:]

    for table in tables.values():
        reader.assert_intact(table)
    want = streams.expected_append()
    want = (want[0] + 1, want[1] + 1, *want[2:])  # and the foreign row (id -1, zeros)
    got = reader.sql(f"SELECT count(*), count(DISTINCT id), sum(h), sum(amount) FROM {{c}}.{tables['append']}")[0]
    assert tuple(int(v) for v in got) == want, "append table read by Spark"
    notes = reader.sql(f"SELECT count(note) FROM {{c}}.{tables['append']}")[0][0]
    assert notes == sum(1 for r in streams.appended if "note" in r) == 3000, "the evolved column"
    spec = reader.table(tables["append"]).spec()
    assert [f.transform().toString() for f in spec.fields()] == ["day"]
    spark_rows = {int(r[0]): (int(r[1]), int(r[2])) for r in reader.sql(
        f"SELECT id, v, seq FROM {{c}}.{tables['upsert']}")}
    model = {k: (r["v"], r["seq"]) for k, r in streams.current.items()}
    assert spark_rows == model, "upsert table read by Spark"

    con = duckdb_connection(s3=True)
    con.execute(lake.duckdb_secret)
    duck = con.execute(f"SELECT count(*), count(DISTINCT id), sum(h), sum(amount) FROM "
                       f"iceberg_scan('{duck_path(reader.metadata_location(tables['append']))}')").fetchone()
    assert duck is not None and tuple(int(v) for v in duck) == want, "append table read by DuckDB"
    duck_rows = {int(r[0]): (int(r[1]), int(r[2])) for r in con.execute(
        f"SELECT id, v, seq FROM iceberg_scan('{duck_path(reader.metadata_location(tables['upsert']))}')").fetchall()}
    assert duck_rows == model, "upsert table read by DuckDB"

    for which in ("append", "upsert"):
        location = reader.metadata_location(tables[which])
        assert location.startswith("file:" if lake.kind == "hive" else "s3://"), location
        unmarked = [s for s in reader.snapshots(tables[which])
                    if f"kafka.connect.source-offsets.{groups[which]}" not in s["summary"]]
        assert len(unmarked) == (1 if which == "append" else 0), unmarked  # only the foreign writer's
    assert "positions from the tables" in daemon.output()
    for secret in lake.secrets:
        assert secret not in daemon.output(), "a secret in the daemon's log"

    # The same tables through pyiceberg, with the same catalog settings and no JVM.
    for which, connector_file in zip(("append", "upsert"), daemon.connector_files, strict=True):
        shown = subprocess.run([sys.executable, "-m", "tabletopic", "offsets", str(connector_file), "--by-table"],
                               capture_output=True, text=True, timeout=120, env={**os.environ, **lake.env})
        assert shown.returncode == 0, shown.stderr[-3000:]
        held = reader.offsets(tables[which], groups[which])
        want_line = " ".join(f"{t}[{p}]={o}" for (t, p), o in sorted(held.items()))
        line = shown.stdout.strip()
        assert line.startswith(f"{tables[which]} (from the snapshot, ") and line.endswith(f"): {want_line}"), line
        for secret in lake.secrets:
            assert secret not in shown.stdout + shown.stderr


def test_validate_names_the_catalog_and_storage(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = tmp_path / "c.properties"
    path.write_text("name=x\ntopics=t\niceberg.tables=db.t\niceberg.catalog.type=rest\n"
                    "iceberg.catalog.uri=http://127.0.0.1:1\niceberg.catalog.warehouse=s3://lake/wh\n"
                    "iceberg.catalog.s3.secret-access-key=do-not-print-me\n")
    proc = subprocess.run([sys.executable, "-m", "tabletopic.cli", "validate", str(path)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "catalog rest" in proc.stdout and "storage s3 at s3://lake/wh" in proc.stdout
    assert "do-not-print-me" not in proc.stdout + proc.stderr

    path.write_text("name=x\ntopics=t\niceberg.tables=db.t\niceberg.catalog.type=hadoop\n"
                    "iceberg.catalog.warehouse=s3a://lake/warehouse\n")
    proc = subprocess.run([sys.executable, "-m", "tabletopic.cli", "validate", str(path)],
                          capture_output=True, text=True)
    assert proc.returncode != 0
    assert "use iceberg.catalog.type=jdbc, rest or glue" in proc.stdout


def test_the_emulated_glue_refuses_an_update_from_a_version_that_moved_on(tmp_path: Path) -> None:
    # Iceberg's Glue commit is optimistic on UpdateTable's VersionId; plain moto applies every update,
    # and a sink commit beside another writer's was then lost (test_lake[glue] read 750 rows short).
    import botocore.exceptions

    with MotoLake(log_path=tmp_path / "moto.log") as moto:
        glue = moto.boto3_client("glue")
        glue.create_database(DatabaseInput={"Name": "db"})
        glue.create_table(DatabaseName="db", TableInput={"Name": "t", "Parameters": {"metadata_location": "m1"}})
        base = glue.get_table(DatabaseName="db", Name="t")["Table"]["VersionId"]
        glue.update_table(DatabaseName="db", TableInput={"Name": "t", "Parameters": {"metadata_location": "m2"}},
                          VersionId=base)
        with pytest.raises(botocore.exceptions.ClientError) as refused:
            glue.update_table(DatabaseName="db", TableInput={"Name": "t", "Parameters": {"metadata_location": "m3"}},
                              VersionId=base)
        assert refused.value.response["Error"]["Code"] == "ConcurrentModificationException"
        assert glue.get_table(DatabaseName="db", Name="t")["Table"]["Parameters"] == {"metadata_location": "m2"}
