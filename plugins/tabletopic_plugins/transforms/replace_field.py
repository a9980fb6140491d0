"""``org.apache.kafka.connect.transforms.ReplaceField$Key`` and ``$Value``: keep, drop and rename fields.

As Connect's: ``exclude`` wins over ``include``; an empty ``include`` keeps every field; ``renames`` is a
list of ``old:new``; a null side passes unchanged. ``whitelist`` and ``blacklist``, the names before
Kafka 3.0, are read as ``include`` and ``exclude``. Two fields renamed to one name are refused in a
struct; in a schemaless value the later one stays, as in Connect's map.
"""

from __future__ import annotations

from collections.abc import Mapping

from tabletopic.convert.records import SinkRecords
from tabletopic.transform.chain import every_record
from tabletopic_plugins.transforms.connect_record import (
    KEY,
    REPLACE_NULL_WITH_DEFAULT,
    Sided,
    is_primitive,
    items,
    java_split,
    operand,
    replace_null_with_default,
    required_struct,
    with_operand,
)


def parse_renames(pairs: list[str]) -> dict[str, str]:
    renames = {}
    for pair in pairs:
        parts = java_split(pair, ":")
        if len(parts) != 2:
            raise ValueError(f"Invalid value {pairs} for configuration renames: Invalid rename mapping: {pair}")
        renames[parts[0]] = parts[1]
    return renames


class ReplaceField(Sided):
    keys = frozenset(("include", "exclude", "renames", "whitelist", "blacklist", REPLACE_NULL_WITH_DEFAULT))

    def configure(self, props: Mapping[str, str]) -> None:
        self.include = set(items(props, "include") or items(props, "whitelist"))
        self.exclude = set(items(props, "exclude") or items(props, "blacklist"))
        self.renames = parse_renames(items(props, "renames"))
        replace_null_with_default(props)

    def apply(self, records: SinkRecords) -> SinkRecords:
        table = operand(records, self.side)
        if table is None:
            return records
        if is_primitive(records, self.side):
            raise every_record(records, required_struct(records, self.side, "field replacement"))
        keep = [c for c in table.column_names if c not in self.exclude and (not self.include or c in self.include)]
        names = [self.renames.get(c, c) for c in keep]
        if len(set(names)) != len(names):
            twice = next(n for n in names if names.count(n) > 1)
            if not records.schemaless:
                raise every_record(records, f"Cannot create field because of field name duplication {twice}")
            last = {name: i for i, name in enumerate(names)}
            chosen = sorted(last.values())
            keep, names = [keep[i] for i in chosen], [names[i] for i in chosen]
        return with_operand(records, self.side, table.select(keep).rename_columns(names), False)


class ReplaceFieldKey(ReplaceField):
    side = KEY


class ReplaceFieldValue(ReplaceField):
    pass
