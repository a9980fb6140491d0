"""A few schemaless JSON objects read without Arrow's reader make the table the reader makes, or nothing."""

from __future__ import annotations

import json

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from tabletopic.convert.converter import ConvertResult
from tabletopic.convert.input_guard import Lines
from tabletopic_plugins.converters.json_converter import JsonConverter, _convert_schemaless, _read_few, _read_lines
from tabletopic_plugins.converters.json_small_batch import MAX_RECORDS, read_small
from tests.unit.fuzzing import examples

DATES = ["2024-05-01T12:00:00Z", "2024-05-01T12:00:00.5Z", "2024-05-01T12:00:00+01:00", "2024-05-01T12:00:00+0100",
         "2024-05-01 12:00", "2024-05-01T12", "2024-05-01", "2024-13-01", "2024-02-30", "0000-01-01",
         "2024-05-01T24:00:00", "2024-05-01T12:00:00z", "1970-01-01T00:00:00-00:00", "9999-12-31T23:59:59Z",
         "2024-05-01T12:00Z", "2024-05", "2024-05-01x", "1999-12-31T23:59:59+14:00"]
TEXT = st.sampled_from(DATES) | st.text(max_size=6) | st.sampled_from(["\x00", "é", "12:00:00", "2024"])
SCALARS = (st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**63 - 1)
           | st.integers(min_value=2**63, max_value=2**64) | st.floats(allow_nan=False, allow_infinity=False)
           | TEXT)
KEYS = st.sampled_from(["a", "b", "c", "ts", ""])
VALUES = st.recursive(SCALARS, lambda kids: st.lists(kids, max_size=3) | st.dictionaries(KEYS, kids, max_size=3),
                      max_leaves=8)
ROWS = st.dictionaries(KEYS, VALUES | TEXT, max_size=4)


def without_it(payloads: list[bytes]) -> ConvertResult:
    """The converter's reading of a batch of one-line objects when every batch goes to the reader."""
    read = _read_lines(Lines(payloads), {})
    return read if read is not None else _convert_schemaless(payloads)


@settings(max_examples=examples(1500), deadline=None)
@given(st.lists(ROWS, min_size=1, max_size=MAX_RECORDS))
def test_what_it_reads_is_what_the_reader_reads(docs: list[dict]) -> None:
    payloads = [json.dumps(d, separators=(",", ":")).encode() for d in docs]
    mine = _read_few(payloads)
    if mine is None:
        return  # the reader decides
    theirs = without_it(payloads)
    assert not theirs.failures and not theirs.nulls, "read a batch the reader refuses"
    assert len(theirs.parts) == 1 and list(theirs.parts[0].indexes) == list(range(len(docs)))
    assert mine.parts[0].table.schema == theirs.parts[0].table.schema
    assert mine.parts[0].table.to_pylist() == theirs.parts[0].table.to_pylist()


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(ROWS, min_size=1, max_size=MAX_RECORDS), st.sampled_from([b"NaN", b"1e400", b'"\\ud800"']))
def test_what_the_reader_refuses_it_leaves_to_the_reader(docs: list[dict], odd: bytes) -> None:
    payloads = [json.dumps(d, separators=(",", ":")).encode() for d in docs] + [b'{"a":' + odd + b"}"]
    assert read_small(payloads) is None
    assert read_small([b'{"a":1,"a":2}']) is None  # the reader refuses a key twice; json.loads keeps the last


def test_a_quiet_topics_records_are_read_without_the_reader() -> None:
    """The records of a trickle, dates included: without this path each costs a reader call."""
    payloads = [b'{"id":%d,"user":"u1","amount":12.5,"ts":"2024-05-01T12:00:00Z","tags":["a"],"at":{"x":null}}' % i
                for i in range(MAX_RECORDS)]
    mine = read_small(payloads)
    assert mine is not None
    assert mine.schema.field("ts").type == pa.string()  # JSON holds a string: the column's type converts it
    converter = JsonConverter()
    converter.configure({"schemas.enable": "false"}, is_key=False)
    assert converter.convert("t", payloads).parts[0].table.equals(without_it(payloads).parts[0].table)


def test_a_string_that_looks_like_a_date_stays_the_string_it_was() -> None:
    """Arrow's reader would make a UTC timestamp of these, losing the offset, or a midnight of a date."""
    texts = ["2023-05-18T11:22:33-08:00", "2023-05-18", "2023-05-18 11:22:33"]
    payloads = [json.dumps({"ts": t, "n": i}).encode() for i, t in enumerate(texts * 3)]
    converter = JsonConverter()
    converter.configure({"schemas.enable": "false"}, is_key=False)
    for batch in (payloads, payloads[:2], payloads):  # the reader, the small path, and the reader again
        (part,) = converter.convert("t", batch).parts
        assert part.schemaless and part.table.column("ts").to_pylist() == [json.loads(p)["ts"] for p in batch]
    nested = [json.dumps({"at": {"ts": t}}).encode() for t in texts * 3]
    (part,) = converter.convert("t", nested).parts
    assert part.table.column("at").to_pylist() == [{"ts": t} for t in texts * 3]
