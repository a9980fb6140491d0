"""Upsert and CDC: equality deletes and rows in one snapshot, checked against a model dict."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tabletopic.offsets.source_offsets import offsets_key
from tabletopic.write.spark_session import SparkRuntime
from tests.support import (
    DaemonProcess,
    Warehouse,
    connector_props,
    create_topic,
    produce,
    run_in_process,
    unique,
    wait_until,
    worker_props,
)
from tests.upsert_model import (
    BASE_S,
    DAY_S,
    PARTITIONS,
    Model,
    assert_deletion_vectors_only,
    duckdb_state,
    position_deletes_added,
    pyiceberg_state,
    seed,
    spark_state,
)


def _upsert_connector(name: str, topic: str, table: str, warehouse: Warehouse, **extra: str) -> dict[str, str]:
    """Upsert and CDC (``op``) on ``id``, partitioned by day(updated_at), as tests.upsert_model's changes need."""
    return connector_props(name, topic, table, warehouse, {
        "value.converter.schemas.enable": "false", "iceberg.tables.auto-create-enabled": "true",
        "iceberg.tables.default-id-columns": "id", "iceberg.tables.upsert-mode-enabled": "true",
        "iceberg.tables.cdc-field": "op", "iceberg.tables.default-partition-by": "day(updated_at)", **extra})


@pytest.mark.timeout(420)
@pytest.mark.slow
def test_random_changes_with_sigkills_match_the_model(bootstrap: str, warehouse: Warehouse, tmp_path: Path) -> None:
    topic, table = unique("changes"), "cdc.accounts"
    create_topic(bootstrap, topic, PARTITIONS)
    connector = _upsert_connector("upsert", topic, table, warehouse, **{
        "iceberg.control.commit.interval-ms": "1500", "tabletopic.maintenance.equality-deletes.convert": "look"})
    group = f"connect-{connector['name']}"
    _changes_with_sigkills(bootstrap, warehouse, tmp_path, topic, table, connector, Model(seed=11, keys=300))

    # Every commit is one snapshot carrying the offsets; deletes are equality deletes on id.
    t = warehouse.table(table)
    assert list(t.schema().identifierFieldNames()) == ["id"]
    id_field = t.schema().findField("id").fieldId()
    delete_specs = set()
    found_deletes = 0
    for snapshot in t.snapshots():
        assert snapshot.summary().containsKey(offsets_key(group))
        for delete in snapshot.addedDeleteFiles(t.io()):
            assert delete.content().id() == 2  # EQUALITY_DELETES
            assert list(delete.equalityFieldIds()) == [id_field]
            delete_specs.add(delete.specId())
            found_deletes += 1
    assert found_deletes > 0
    assert all(t.specs().get(s).isUnpartitioned() for s in delete_specs)
    assert [f.transform().toString() for f in t.spec().fields()] == ["day"]

def _changes_with_sigkills(bootstrap: str, warehouse: Warehouse, tmp_path: Path, topic: str, table: str,
                           connector: dict[str, str], model: Model) -> None:
    """Inserts every key of ``model``, then four phases of random changes, two of them with a SIGKILL
    midway; after each, Spark and DuckDB read exactly the model."""
    group = f"connect-{connector['name']}"
    daemon = DaemonProcess(tmp_path, worker_props(bootstrap), [connector])

    def committed() -> int:
        return sum(warehouse.offsets(table, group).values())

    seed(bootstrap, topic, model)
    phases = [(1500, True), (1500, False), (1500, True), (1000, False)]
    snapshots_before = 0
    for number, (changes, kill_midway) in enumerate(phases):
        daemon.start()
        chunk = model.changes(changes)
        produce(bootstrap, topic, chunk[: len(chunk) // 2])
        if kill_midway:
            time.sleep(random.Random(number).uniform(3, 8))
            daemon.kill()
            daemon.start()
        produce(bootstrap, topic, chunk[len(chunk) // 2:])
        wait_until(lambda: committed() == model.produced, 240, f"phase {number} committed", daemon)
        daemon.kill()
        warehouse.assert_intact(table)
        state = spark_state(warehouse, table)
        wrong = {k: model.history.get(k) for k in set(state) ^ set(model.rows)}
        wrong |= {k: model.history.get(k) for k in state if k in model.rows and state[k] != model.rows[k]}
        assert state == model.rows, f"phase {number}: Spark; history of the wrong keys: {wrong}"
        assert duckdb_state(warehouse, table) == model.rows, f"phase {number}: DuckDB"
        snapshots = warehouse.snapshots(table)
        assert len(snapshots) > snapshots_before
        snapshots_before = len(snapshots)


@pytest.mark.timeout(420)
@pytest.mark.slow
def test_a_v3_table_takes_deletion_vectors_through_sigkills(bootstrap: str, warehouse: Warehouse,
                                                             tmp_path: Path) -> None:
    """Format version 3, set as the Iceberg connector sets it: commits carry deletion vectors, one per
    data file, where a v2 table's carry position delete files, and each merges the vector before it.
    Upserts and CDC deletes, SIGKILLs midway, and Spark, DuckDB and pyiceberg each read the model."""
    topic, table = unique("v3"), "cdc.accounts_v3"
    create_topic(bootstrap, topic, PARTITIONS)
    connector = _upsert_connector("upsert_v3", topic, table, warehouse, **{
        "iceberg.tables.auto-create-props.format-version": "3", "iceberg.control.commit.interval-ms": "1500"})
    model = Model(seed=12, keys=300)
    _changes_with_sigkills(bootstrap, warehouse, tmp_path, topic, table, connector, model)
    assert pyiceberg_state(bootstrap, connector, table) == model.rows

    assert_deletion_vectors_only(warehouse, table)
    _verify_names_what_is_removed(tmp_path / "connector-0.properties", warehouse, table)


def _verify_names_what_is_removed(connector_file: Path, warehouse: Warehouse, table: str) -> None:
    """``tabletopic verify``: exit 0 on the healthy table; with a data file and a deletion vector of its
    current snapshot removed by hand, exit 1 naming both."""
    def verify() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "tabletopic.cli", "verify", str(connector_file)],
                              capture_output=True, text=True, timeout=120)

    healthy = verify()
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    assert "intact" in healthy.stdout and "deletion vector" in healthy.stdout, healthy.stdout
    live = warehouse.sql(f"SELECT content, file_path FROM {{c}}.{table}.files")
    data = next(r.file_path for r in live if r.content == 0)
    vector = next(r.file_path for r in live if r.content == 1)
    for path in (data, vector):
        Path(path.removeprefix("file:")).unlink()
    broken = verify()
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert f"missing: data file {data}" in broken.stdout, broken.stdout
    assert f"missing: deletion vector {vector}" in broken.stdout, broken.stdout


def test_upsert_semantics_across_rounds(bootstrap: str, spark: SparkRuntime, warehouse: Warehouse) -> None:
    """Insert+delete in one batch, delete of a missing key, a key changing partition, tombstones."""
    topic, table = unique("keyed"), "cdc.small"
    create_topic(bootstrap, topic, 1)

    def change(key: int, op: str | None, v: int = 0, day: int = 0) -> tuple[bytes, bytes | None, int]:
        if op is None:
            return str(key).encode(), None, 0
        ts = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(BASE_S + day * DAY_S))
        return str(key).encode(), json.dumps({"id": key, "op": op, "v": v, "updated_at": ts}).encode(), 0

    steps = [
        [change(1, "I", 1), change(2, "I", 1), change(3, "I", 1), change(3, "D"), change(99, "D")],
        [change(1, "U", 2, day=3), change(2, None)],
        [change(1, None), change(4, "c", 5), change(4, "u", 6, day=1)],
    ]
    expected = [{1: 1, 2: 1}, {1: 2}, {4: 6}]
    connector = connector_props("small", topic, table, warehouse, {
        "value.converter.schemas.enable": "false", "iceberg.tables.auto-create-enabled": "true",
        "iceberg.tables.default-id-columns": "id", "iceberg.tables.cdc-field": "op",
        "iceberg.tables.default-partition-by": "day(updated_at)", "iceberg.control.commit.interval-ms": "1000"})
    sent = 0
    for step, want in zip(steps, expected, strict=True):
        produce(bootstrap, topic, step)
        sent += len(step)
        code, _ = run_in_process(spark, worker_props(bootstrap), [connector], until=lambda d, n=sent: sum(
            d.connectors[0].task.committed_offsets(table).values()) >= n)
        assert code == 0
        got = {int(r.id): int(r.v) for r in warehouse.rows(table, "id, v")}
        assert got == want


@pytest.mark.parametrize("prefix", ["acct-", "customer-account-"], ids=["short", "past-the-statistics"])
def test_string_keys_are_updated_in_the_files_whose_bounds_hold_them(bootstrap: str, spark: SparkRuntime,
                                                                    warehouse: Warehouse, prefix: str) -> None:
    """A commit reads only the data files whose key bounds reach its deletes' own bounds: exact ones for
    short keys, and, past the 16 characters Parquet statistics keep of a string, cut ones."""
    topic, table = unique("strkeys"), f"cdc.strkeys_{len(prefix)}"
    create_topic(bootstrap, topic, 1)

    def upsert(key: int, v: int) -> tuple[bytes, bytes, int]:
        return f"{prefix}{key:04}".encode(), json.dumps({"id": f"{prefix}{key:04}", "v": v}).encode(), 0

    steps = [
        [upsert(k, 1) for k in range(0, 40)],
        [upsert(k, 2) for k in range(40, 80)],  # keys above every file's bound: nothing to delete
        [upsert(k, 3) for k in (0, 39, 40, 79)] + [upsert(k, 3) for k in range(80, 90)],  # the bounds' own keys
    ]
    connector = connector_props(f"strkeys{len(prefix)}", topic, table, warehouse, {
        "value.converter.schemas.enable": "false", "iceberg.tables.auto-create-enabled": "true",
        "iceberg.tables.default-id-columns": "id", "iceberg.tables.upsert-mode-enabled": "true",
        "iceberg.control.commit.interval-ms": "1000"})
    want: dict[str, int] = {}
    sent = 0
    for step in steps:
        produce(bootstrap, topic, step)
        sent += len(step)
        want.update({json.loads(value)["id"]: json.loads(value)["v"] for _, value, _ in step})
        code, _ = run_in_process(spark, worker_props(bootstrap), [connector], until=lambda d, n=sent: sum(
            d.connectors[0].task.committed_offsets(table).values()) >= n)
        assert code == 0
        rows = [(r.id, int(r.v)) for r in warehouse.rows(table, "id, v")]
        assert len(rows) == len(want), "a key is in the table twice: its old row was not deleted"
        assert dict(rows) == want


@pytest.mark.timeout(420)
@pytest.mark.slow
def test_a_v2_table_upgraded_to_v3_while_the_sink_runs_takes_vectors_from_its_next_commit(
        bootstrap: str, warehouse: Warehouse, tmp_path: Path) -> None:
    topic, table = unique("upgrade"), "cdc.accounts_upgraded"
    create_topic(bootstrap, topic, PARTITIONS)
    connector = _upsert_connector("upgrade", topic, table, warehouse, **{"iceberg.control.commit.interval-ms": "1000"})
    group = f"connect-{connector['name']}"
    model = Model(seed=14, keys=300)
    seed(bootstrap, topic, model)
    daemon = DaemonProcess(tmp_path, worker_props(bootstrap), [connector]).start()

    def changes(n: int, what: str) -> None:
        produce(bootstrap, topic, model.changes(n))
        wait_until(lambda: sum(warehouse.offsets(table, group).values()) == model.produced, 120, what, daemon)

    wait_until(lambda: sum(warehouse.offsets(table, group).values()) == model.produced, 120, "the keys", daemon)
    changes(600, "changes to the v2 table")
    before = {s.snapshotId() for s in warehouse.table(table).snapshots()}
    v2_positions = position_deletes_added(warehouse, table)
    assert v2_positions and set(v2_positions) == {"PARQUET"}

    warehouse.sql(f"ALTER TABLE {{c}}.{table} SET TBLPROPERTIES ('format-version'='3')")
    for batch in range(3):
        changes(500, f"batch {batch} after the upgrade")
    daemon.kill()
    warehouse.assert_intact(table)
    assert spark_state(warehouse, table) == model.rows
    assert duckdb_state(warehouse, table) == model.rows
    assert pyiceberg_state(bootstrap, connector, table) == model.rows
    after = position_deletes_added(warehouse, table, after=before)
    assert after and set(after) == {"PUFFIN"}, after
    assert_deletion_vectors_only(warehouse, table, history=False)
