"""Connect's header transforms: ``DropHeaders``, ``InsertHeader`` and ``HeaderFrom$Key``/``$Value``.

Headers are not written to tables; they matter to the predicates after (``HasHeaderKey``), so these
transforms keep what a record's headers would be. As Connect's:

* DropHeaders removes every header with one of ``headers``' names.
* InsertHeader adds ``header`` with ``value.literal`` (a header may occur more than once).
* HeaderFrom copies (``operation=copy``) or moves (``move``: the fields leave the side) each of ``fields``
  to the header of the same position in ``headers``. A struct without the field fails the record; a
  schemaless value without it gives a header with a null value. A null side fails it, as in Connect.
"""

from __future__ import annotations

from collections.abc import Mapping

from tabletopic.convert.records import Headers, SinkRecords
from tabletopic.transform.chain import every_record
from tabletopic_plugins.transforms.connect_record import (
    KEY,
    REPLACE_NULL_WITH_DEFAULT,
    Sided,
    is_primitive,
    one_of,
    operand,
    replace_null_with_default,
    required,
    required_items,
    required_struct,
    with_operand,
)


def _headers(records: SinkRecords) -> list[Headers]:
    return records.headers if records.headers is not None else [[] for _ in range(len(records))]


class DropHeaders:
    keys = frozenset(("headers",))
    needs_headers = True
    takes_tombstones = True

    def configure(self, props: Mapping[str, str]) -> None:
        self.names = set(required_items(props, "headers"))

    def apply(self, records: SinkRecords) -> SinkRecords:
        return records.with_headers([[h for h in row if h[0] not in self.names] for row in _headers(records)])


class InsertHeader:
    keys = frozenset(("header", "value.literal"))
    needs_headers = True
    takes_tombstones = True

    def configure(self, props: Mapping[str, str]) -> None:
        self.name = required(props, "header")
        self.value = required(props, "value.literal")

    def apply(self, records: SinkRecords) -> SinkRecords:
        return records.with_headers([[*row, (self.name, self.value)] for row in _headers(records)])


class HeaderFrom(Sided):
    keys = frozenset(("fields", "headers", "operation", REPLACE_NULL_WITH_DEFAULT))
    needs_headers = True
    takes_tombstones = True

    def configure(self, props: Mapping[str, str]) -> None:
        self.fields = required_items(props, "fields")
        self.names = required_items(props, "headers")
        if len(self.fields) != len(self.names):
            raise ValueError("'headers' config must have the same number of elements as 'fields' config.")
        self.move = one_of(props, "operation", ("move", "copy"), None) == "move"
        replace_null_with_default(props)

    def apply(self, records: SinkRecords) -> SinkRecords:
        table = operand(records, self.side)
        operation = "move" if self.move else "copy"
        if table is None or is_primitive(records, self.side):
            raise every_record(records, required_struct(records, self.side, f"header {operation}"))
        values = []
        for name in self.fields:
            at = table.schema.get_field_index(name)
            if at < 0 and not records.schemaless:
                raise every_record(records, f"field {name!r} is not in the record's schema")
            values.append(table.column(at).to_pylist() if at >= 0 else [None] * len(records))
        headers = [[*row, *((header, column[i]) for header, column in zip(self.names, values, strict=True))]
                   for i, row in enumerate(_headers(records))]
        if self.move:
            table = table.select([c for c in table.column_names if c not in self.fields])
        return with_operand(records, self.side, table, False).with_headers(headers)


class HeaderFromKey(HeaderFrom):
    side = KEY


class HeaderFromValue(HeaderFrom):
    pass
