"""Which catalog and storage the iceberg.catalog.* keys select, decided without a JVM."""

from __future__ import annotations

from tabletopic.config.catalog_settings import S3_FILE_IO, plan_catalog


def test_an_s3_warehouse_gets_s3fileio_unless_set() -> None:
    plan = plan_catalog({"type": "jdbc", "uri": "jdbc:postgresql://db/x", "warehouse": "s3://lake/wh"}, "pg.jar")
    assert plan.props["io-impl"] == S3_FILE_IO and plan.storage == "s3" and plan.needs_lake_jars
    custom = plan_catalog({"type": "jdbc", "uri": "jdbc:sqlite::memory:", "warehouse": "s3://lake/wh",
                           "io-impl": "com.example.MyIO"})
    assert custom.props["io-impl"] == "com.example.MyIO"


def test_kinds_from_type_or_implementation() -> None:
    glue = plan_catalog({"catalog-impl": "org.apache.iceberg.aws.glue.GlueCatalog", "warehouse": "s3://b/w"})
    assert glue.kind == "glue" and glue.needs_lake_jars and not glue.problems
    rest = plan_catalog({"type": "rest", "uri": "https://cat"})
    assert rest.kind == "rest" and rest.needs_lake_jars and rest.storage == "set by the catalog server"
    local = plan_catalog({"type": "hadoop", "warehouse": "file:///tmp/wh"})
    assert local.storage == "file" and not local.needs_lake_jars and "tested on local files" in local.describe()
    nessie = plan_catalog({"catalog-impl": "org.apache.iceberg.nessie.NessieCatalog", "uri": "http://n"})
    assert "not tested" in nessie.describe()


def test_what_cannot_work_is_a_problem() -> None:
    assert any("hadoop catalog" in p for p in plan_catalog({"type": "hadoop", "warehouse": "s3a://b/w"}).problems)
    assert any("needs iceberg.catalog.uri" in p for p in plan_catalog({"type": "rest"}).problems)
