"""`tabletopic verify`'s check, on tables pyiceberg writes to a SQLite catalog: nothing missed, nothing made up."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tabletopic.ops.table_integrity import check_table


@pytest.fixture
def table(tmp_path: Path) -> Any:
    from pyiceberg.catalog.sql import SqlCatalog  # a second to import: only where it is used

    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}/wh")
    catalog.create_namespace("db")
    created = catalog.create_table("db.events", pa.schema([pa.field("id", pa.int64())]))
    for start in (0, 10):
        created.append(pa.table({"id": pa.array(range(start, start + 10), pa.int64())}))
    return catalog.load_table("db.events")


def _live(table: Any) -> list[Any]:
    snapshot = table.current_snapshot()
    return [e.data_file for m in snapshot.manifests(table.io) for e in m.fetch_manifest_entry(table.io)]


def _local(path: str) -> Path:
    return Path(path.removeprefix("file://").removeprefix("file:"))


def test_a_healthy_table_is_intact_and_every_file_is_counted(table: Any) -> None:
    report = check_table(table, "db.events")
    assert report.intact, report.describe()
    assert report.checked == {"data file": 2, "manifest": 2, "manifest list": 1}
    assert "intact" in report.describe()[0]


def test_a_missing_data_file_is_named(table: Any) -> None:
    gone = _live(table)[0].file_path
    _local(gone).unlink()
    report = check_table(table, "db.events")
    assert not report.intact
    assert [p.describe() for p in report.problems] == [f"missing: data file {gone}"]


def test_a_file_of_another_size_is_named_with_both_sizes(table: Any) -> None:
    file = _live(table)[1]
    with open(_local(file.file_path), "ab") as grown:
        grown.write(b"x")
    report = check_table(table, "db.events")
    assert [p.problem for p in report.problems] == [
        f"{file.file_size_in_bytes + 1} bytes where the manifest records {file.file_size_in_bytes}"]


def test_a_missing_manifest_is_named_and_its_files_are_not_guessed(table: Any) -> None:
    manifest = table.current_snapshot().manifests(table.io)[0].manifest_path
    _local(manifest).unlink()
    report = check_table(table, "db.events")
    assert [(p.kind, p.path, p.problem) for p in report.problems] == [("manifest", manifest, "missing")]


def test_a_table_without_snapshots_has_nothing_to_check(tmp_path: Path) -> None:
    from pyiceberg.catalog.sql import SqlCatalog  # a second to import: only where it is used

    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}/wh")
    catalog.create_namespace("db")
    empty = catalog.create_table("db.empty", pa.schema([pa.field("id", pa.int64())]))
    report = check_table(empty, "db.empty")
    assert report.intact and report.describe() == ["table db.empty: no snapshot yet, nothing to check"]
