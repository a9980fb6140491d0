"""`tabletopic status`'s per-table reading, without a broker: a table the sink has not made yet is said so."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from tabletopic.config.connector import parse_connector
from tabletopic.config.worker import parse_worker
from tabletopic.ops.connector_status import table_statuses
from tabletopic.ops.table_offsets import RecordingTables


def test_a_table_not_created_yet_is_reported_as_such_beside_one_that_exists(tmp_path: Path) -> None:
    # A hadoop catalog's layout: the table's metadata under <warehouse>/db/made, found by its version hint.
    from pyiceberg.catalog.sql import SqlCatalog  # a second to import: only where it is used

    catalog = SqlCatalog("c", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}/wh")
    catalog.create_namespace("db")
    made_table = catalog.create_table("db.made", pa.schema([pa.field("id", pa.int64())]))
    metadata = Path(made_table.metadata_location.removeprefix("file://"))
    metadata.rename(metadata.with_name("v1.metadata.json"))
    (metadata.parent / "version-hint.text").write_text("1")
    config = parse_connector({"name": "s", "topics": "t", "iceberg.tables": "db.made,db.later",
                              "iceberg.catalog.type": "hadoop", "iceberg.catalog.warehouse": f"file://{tmp_path}/wh"},
                             parse_worker({}))
    made, later = table_statuses(RecordingTables.of(config), ["db.made", "db.later"])
    assert (made.exists, made.recorded.source) == (True, "none")
    assert (later.exists, later.recorded.offsets) == (False, {})
