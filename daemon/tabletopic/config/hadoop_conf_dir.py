"""``iceberg.hadoop-conf-dir``: the Hadoop XML files of a directory, as the Iceberg sink loads them.

The Iceberg sink adds ``core-site.xml``, ``hdfs-site.xml`` and ``hive-site.xml`` from that directory to
its Hadoop configuration, under the sink's own ``iceberg.hadoop.*`` keys. Here their properties become
the catalog's ``hadoop.*`` properties, which Spark applies to the catalog's Hadoop configuration, with
the same precedence: ``iceberg.catalog.hadoop.*``, then ``iceberg.hadoop.*``, then these files.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

FILES = ("core-site.xml", "hdfs-site.xml", "hive-site.xml")


def hadoop_conf_dir_props(directory: str) -> tuple[dict[str, str], list[str]]:
    """The properties the directory's Hadoop files set, and the problems met reading them."""
    root = Path(directory)
    if not root.is_dir():
        return {}, [f"{directory} is not a directory"]
    props: dict[str, str] = {}
    problems = []
    for name in FILES:
        path = root / name
        if not path.is_file():
            continue
        try:
            tree = ET.parse(path)
        except (ET.ParseError, OSError) as exc:
            problems.append(f"{path} cannot be read as Hadoop's XML configuration: {exc}")
            continue
        for prop in tree.getroot().iter("property"):
            key, value = prop.findtext("name"), prop.findtext("value")
            if key and value is not None:
                props[key.strip()] = value.strip()
    return props, problems
