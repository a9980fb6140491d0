"""A connector's tables through pyiceberg, with the same ``iceberg.catalog.*`` settings as the JVM.

For what needs no JVM: ``tabletopic maintain --dry-run`` reads snapshots, summaries and file
counts here and answers in about a second.  The catalog properties are Iceberg's own names,
which pyiceberg mostly shares (``uri``, ``warehouse``, ``token``, ``credential``, ``s3.*``).
Where it differs:

* a hadoop catalog has no pyiceberg counterpart; its ``version-hint.text`` names the
  current metadata file, which is opened as a static table;
* a JDBC catalog is pyiceberg's SQL catalog over the same ``iceberg_tables`` table,
  reached through SQLAlchemy with the pure-Python ``pg8000`` driver.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote, urlsplit

from tabletopic.config.catalog_settings import plan_catalog


class CatalogNotSupported(RuntimeError):
    """This catalog cannot be read without the JVM."""


class NamedCatalog(Protocol):
    """The two keys a read through pyiceberg needs: a connector's configuration has both."""

    @property
    def catalog_name(self) -> str: ...  # iceberg.catalog

    @property
    def catalog_props(self) -> Mapping[str, str]: ...  # iceberg.catalog.*, without the prefix


def open_table(catalog: NamedCatalog, name: str) -> Any:
    return open_catalog_table(catalog.catalog_name, catalog.catalog_props, name)


def open_catalog_table(catalog_name: str, catalog_props: Mapping[str, str], name: str) -> Any:
    """Table ``name`` of the catalog that ``iceberg.catalog.*`` properties ``catalog_props`` describe."""
    props = dict(catalog_props)
    kind = plan_catalog(props).kind
    if kind == "hadoop":
        return _hadoop_table(props.get("warehouse", ""), name)
    from pyiceberg.catalog import load_catalog
    if kind == "rest":
        catalog = load_catalog(catalog_name, **{**props, "type": "rest"})
    elif kind == "glue":
        catalog = load_catalog(catalog_name, **{**props, "type": "glue"})
    elif kind == "jdbc":
        catalog = load_catalog(catalog_name, **{**props, "type": "sql", "uri": _sqlalchemy_uri(props)})
    elif kind == "hive":
        catalog = load_catalog(catalog_name, **{**props, "type": "hive"})
    else:
        raise CatalogNotSupported(f"a {kind} catalog is read only through the JVM; run without --dry-run")
    return catalog.load_table(name)


def _hadoop_table(warehouse: str, name: str) -> Any:
    from pyiceberg.table import StaticTable
    root = urlsplit(warehouse)
    if root.scheme not in ("", "file"):
        raise CatalogNotSupported(f"a hadoop catalog on {root.scheme}:// is read only through the JVM")
    metadata = Path(root.path).joinpath(*name.split(".")) / "metadata"
    hint = metadata / "version-hint.text"
    if not hint.exists():
        raise FileNotFoundError(f"table {name} not found under {warehouse}")
    version = hint.read_text().strip()
    return StaticTable.from_metadata(f"file://{metadata}/v{version}.metadata.json")


def _sqlalchemy_uri(props: dict[str, str]) -> str:
    uri = props.get("uri", "")
    if not uri.startswith("jdbc:postgresql://"):
        raise CatalogNotSupported(f"JDBC catalog {uri.split('?')[0]!r}: only PostgreSQL is read without the JVM")
    rest = urlsplit(uri[len("jdbc:"):])
    user = quote(props.get("jdbc.user", ""), safe="")
    password = quote(props.get("jdbc.password", ""), safe="")
    credentials = f"{user}:{password}@" if user else ""
    return f"postgresql+pg8000://{credentials}{rest.netloc}{rest.path}"
