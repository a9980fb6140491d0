"""``org.apache.kafka.connect.transforms.ReplaceField$Value``: include, exclude and rename columns."""

from __future__ import annotations

from collections.abc import Mapping

from tabletopic.convert.records import SinkRecords


def _list(text: str | None) -> list[str]:
    return [s.strip() for s in (text or "").split(",") if s.strip()]


class ReplaceFieldValue:
    def configure(self, props: Mapping[str, str]) -> None:
        self.include = _list(props.get("include") or props.get("whitelist"))
        self.exclude = set(_list(props.get("exclude") or props.get("blacklist")))
        self.renames: dict[str, str] = {}
        for pair in _list(props.get("renames")):
            old, sep, new = pair.partition(":")
            if not sep or not old or not new:
                raise ValueError(f"renames entry {pair!r} must look like old:new")
            self.renames[old] = new

    def apply(self, records: SinkRecords) -> SinkRecords:
        table = records.value
        keep = [c for c in table.column_names
                if c not in self.exclude and (not self.include or c in self.include)]
        table = table.select(keep)
        return records.with_value(table.rename_columns([self.renames.get(c, c) for c in keep]))
