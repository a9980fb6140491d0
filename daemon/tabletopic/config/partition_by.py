"""Parse ``partition-by`` values in the Iceberg sink connector's syntax.

``id``, ``year(ts)``, ``month(ts)``, ``day(ts)``, ``hour(ts)`` (plural forms too),
``bucket(id, 16)`` and ``truncate(name, 4)``, separated by commas outside parentheses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_CALL = re.compile(r"^\s*(\w+)\s*\(\s*([^()]+?)\s*\)\s*$")
_COLUMN = re.compile(r"^\s*([\w.]+)\s*$")
_SPLIT = re.compile(r",(?![^()]*\))")
_TIME = {"year": "year", "years": "year", "month": "month", "months": "month",
         "day": "day", "days": "day", "hour": "hour", "hours": "hour"}
TRANSFORMS = ("identity", "year", "month", "day", "hour", "bucket[N]", "truncate[W]")


@dataclass(frozen=True)
class PartitionField:
    transform: str  # identity, year, month, day, hour, bucket, truncate
    column: str
    width: int | None = None  # N of bucket, W of truncate

    def __str__(self) -> str:
        if self.transform == "identity":
            return self.column
        if self.width is not None:
            return f"{self.transform}({self.column}, {self.width})"
        return f"{self.transform}({self.column})"


def parse_partition_by(text: str) -> list[PartitionField]:
    """Parse one partition-by value; raise ValueError naming what is wrong."""
    fields: list[PartitionField] = []
    for part in (p for p in _SPLIT.split(text) if p.strip()):
        call = _CALL.match(part)
        if call is None:
            column = _COLUMN.match(part)
            if column is None:
                raise ValueError(f"cannot parse partition field {part.strip()!r}")
            fields.append(PartitionField("identity", column.group(1)))
            continue
        name, args = call.group(1).lower(), [a.strip() for a in call.group(2).split(",")]
        if name in _TIME:
            if len(args) != 1:
                raise ValueError(f"{name}() takes one column, got {call.group(2)!r}")
            fields.append(PartitionField(_TIME[name], args[0]))
        elif name in ("bucket", "truncate"):
            if len(args) != 2 or not args[1].isdigit() or int(args[1]) <= 0:
                raise ValueError(f"{name}() takes a column and a positive whole number, e.g. {name}(id, 16)")
            fields.append(PartitionField(name, args[0], int(args[1])))
        elif name == "identity" and len(args) == 1:
            fields.append(PartitionField("identity", args[0]))
        else:
            raise ValueError(f"unknown partition transform {name!r}; allowed: {', '.join(TRANSFORMS)}")
    return fields
