"""Which catalog and storage a connector's ``iceberg.catalog.*`` keys select, and what they need.

The keys reach Iceberg unchanged, with one default added: a warehouse on ``s3://`` gets
``S3FileIO`` unless ``io-impl`` says otherwise, because Iceberg's default FileIO for
JDBC and Hive catalogs goes through Hadoop's S3A, which tabletopic does not ship.
Everything here is plain Python, so ``validate`` answers without a JVM.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tabletopic.observe.secrets import redacted_repr

S3_FILE_IO = "org.apache.iceberg.aws.s3.S3FileIO"
GLUE_CATALOG = "org.apache.iceberg.aws.glue.GlueCatalog"
_S3_SCHEMES = ("s3://", "s3a://", "s3n://")
# Catalogs tabletopic's tests run end to end on this project's CI; others are passed through untested.
TESTED = {"hadoop": "tested on local files", "jdbc": "tested on PostgreSQL",
          "rest": "tested on SeaweedFS's REST catalog", "glue": "tested on moto's Glue emulation"}
_IMPLS = {GLUE_CATALOG: "glue", "org.apache.iceberg.rest.RESTCatalog": "rest",
          "org.apache.iceberg.jdbc.JdbcCatalog": "jdbc", "org.apache.iceberg.hadoop.HadoopCatalog": "hadoop",
          "org.apache.iceberg.hive.HiveCatalog": "hive", "org.apache.iceberg.nessie.NessieCatalog": "nessie"}
# Where Debian's libpostgresql-jdbc-java puts the driver; spark.jars may name another.
POSTGRES_DRIVER = Path("/usr/share/java/postgresql.jar")


@dataclass(frozen=True, repr=False)
class CatalogPlan:
    kind: str  # hadoop, jdbc, rest, glue, hive, nessie, or the catalog-impl class
    storage: str  # s3, local, hdfs, ... (the warehouse's scheme), or "set by the catalog server"
    warehouse: str
    props: dict[str, str]  # what Iceberg gets
    problems: tuple[str, ...]

    def __repr__(self) -> str:
        return redacted_repr(self)  # it holds secrets: shown as a response shows them

    @property
    def needs_lake_jars(self) -> bool:
        """The AWS SDK and the shaded httpclient5 (see :mod:`tabletopic.write.lake_jars`)."""
        io_impl = self.props.get("io-impl", "")
        return self.kind in ("rest", "glue") or io_impl.startswith("org.apache.iceberg.aws.") or self.storage == "s3"

    @property
    def driver_jars(self) -> tuple[Path, ...]:
        uri = self.props.get("uri", "")
        if self.kind == "jdbc" and uri.startswith("jdbc:postgresql:") and POSTGRES_DRIVER.exists():
            return (POSTGRES_DRIVER,)
        return ()

    def describe(self) -> str:
        where = self.warehouse or "no warehouse set"
        note = TESTED.get(self.kind, "passed to Iceberg unchanged; not tested by tabletopic")
        return f"catalog {self.kind} ({note}), storage {self.storage} at {where}"


def plan_catalog(props: Mapping[str, str], spark_jars: str = "") -> CatalogPlan:
    """Read ``iceberg.catalog.*`` (without the prefix) into a plan, with the S3 default applied."""
    out = dict(props)
    impl = out.get("catalog-impl", "")
    kind = _IMPLS.get(impl, impl) if impl else out.get("type", "hive")
    warehouse = out.get("warehouse", "")
    on_s3 = warehouse.startswith(_S3_SCHEMES)
    if on_s3 and "io-impl" not in out and kind != "hadoop":
        out["io-impl"] = S3_FILE_IO
    if on_s3 or out.get("io-impl") == S3_FILE_IO:
        storage = "s3"
    elif "://" in warehouse:
        storage = warehouse.split("://", 1)[0]
    elif kind == "rest":
        storage = "set by the catalog server"
    else:
        storage = "local" if warehouse else "unknown"
    problems = []
    if kind == "hadoop" and on_s3:
        problems.append("a hadoop catalog keeps its tables through a Hadoop file system, and tabletopic ships no "
                        "S3A: on S3 use iceberg.catalog.type=jdbc, rest or glue (see docs/lake.md)")
    if kind == "jdbc" and out.get("uri", "").startswith("jdbc:postgresql:") and not POSTGRES_DRIVER.exists() \
            and "postgresql" not in spark_jars:
        problems.append(f"a JDBC catalog on PostgreSQL needs its JDBC driver: install it (Debian: apt-get install "
                        f"libpostgresql-jdbc-java, which puts it at {POSTGRES_DRIVER}) or name its jar in the "
                        "worker's spark.jars")
    if kind in ("rest", "jdbc") and not out.get("uri"):
        problems.append(f"a {kind} catalog needs iceberg.catalog.uri")
    return CatalogPlan(kind, storage, warehouse, out, tuple(problems))

