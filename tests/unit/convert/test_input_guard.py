"""The nesting check that runs before Arrow's JSON reader: exact outside strings, across windows."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tabletopic.config.input_limits import nesting_limit
from tabletopic.convert.input_guard import Lines, nesting_depth, not_utf8, too_deep
from tests.unit.fuzzing import examples


def reference_depth(text: bytes) -> int:
    """A plain scanner: brackets outside strings; a quote after an odd run of backslashes is escaped.

    On valid JSON that is what a parser descends into. Backslashes outside strings (invalid JSON)
    escape a quote too, which may count more than a parser, which stops there, never less.
    """
    depth = deepest = run = 0
    in_string = False
    for byte in text:
        char = chr(byte)
        if char == '"' and run % 2 == 0:
            in_string = not in_string
        elif not in_string and char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif not in_string and char in "]}":
            depth -= 1
        run = run + 1 if char == "\\" else 0
    return deepest


JSONISH = st.text(alphabet='[]{}"\\ab,:', max_size=200).map(str.encode)


@settings(max_examples=examples(400), deadline=None)
@given(JSONISH, st.integers(min_value=1, max_value=17))
def test_the_depth_matches_a_plain_scanner_at_any_window(text: bytes, window: int) -> None:
    assert nesting_depth(text, window_bytes=window) == reference_depth(text)


@settings(max_examples=examples(200), deadline=None)
@given(st.recursive(st.none() | st.integers() | st.text(),
                    lambda kids: st.lists(kids) | st.dictionaries(st.text(), kids), max_leaves=30))
def test_the_depth_of_real_json_documents(value: object) -> None:
    text = json.dumps(value).encode()
    assert nesting_depth(text, window_bytes=7) == reference_depth(text)


def test_brackets_inside_strings_and_escaped_quotes_do_not_count() -> None:
    assert nesting_depth(b'{"a": "[[[[{{{{", "b": "\\"[[[["}') == 1
    assert nesting_depth(b'["\\\\", [[1]]]') == 3  # an escaped backslash does not escape the quote


def test_only_values_past_the_limit_are_reported() -> None:
    deep = b'{"id": -1, "deep": ' + b"[" * 1000 + b"]" * 1000 + b"}"
    shallow = b'{"id": 1, "s": "' + b"[" * 5000 + b'"}'
    exact = b"[" * 1000 + b"]" * 1000
    found = too_deep([b'{"id": 1}', deep, shallow, exact], 1000)
    assert list(found) == [1]
    assert "value.converter.max.nesting.depth=1000" in found[1]


def test_a_header_is_skipped() -> None:
    # A Schema Registry header whose id bytes happen to be brackets is not JSON.
    assert too_deep([b"\x00[[[{" + b"[1]"], 3, skip=5) == {}
    assert too_deep([b"\x00[[[{" + b"[[[[1]]]]"], 3, skip=5) == {0: too_deep([b"[[[[1]]]]"], 3)[0]}


def test_an_unterminated_string_hides_what_follows_as_a_parser_would() -> None:
    assert nesting_depth(b'{"s": "' + b"[" * 100) == 1


def test_the_scan_stops_once_past_the_limit() -> None:
    assert nesting_depth(b"[" * 10_000_000, stop_above=1000, window_bytes=4096) <= 4096


def test_the_limit_setting() -> None:
    assert nesting_limit({}) == 1000
    assert nesting_limit({"max.nesting.depth": " 64 "}) == 64
    for bad in ("0", "x", "20000"):
        with pytest.raises(ValueError, match=r"max\.nesting\.depth"):
            nesting_limit({"max.nesting.depth": bad})



def test_values_that_are_not_utf8_are_found_in_a_batch() -> None:
    batch = [b'{"a": "ok"}', b'{"a": "\xff"}', b'{"\xf2x": 1}', "{\"a\": \"é\"}".encode(), b""]
    found = not_utf8(batch)
    assert sorted(found) == [1, 2]
    assert "not UTF-8" in found[1]
    assert not_utf8([b'{"a": 1}'] * 3) == {} and not_utf8([]) == {}


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.tuples(st.integers(min_value=0, max_value=60), st.integers(min_value=0, max_value=40)),
                max_size=12), st.integers(min_value=0, max_value=5))
def test_a_batch_reports_exactly_the_values_past_the_limit(shapes: list[tuple[int, int]], skip: int) -> None:
    # Values of every length around the limit, some with their brackets in a string, behind a header.
    limit = 20
    batch = [b"h" * skip + b"[" * depth + b'"' + b"{" * pad + b'"' + b"]" * depth for depth, pad in shapes]
    expected = {i for i, (depth, _) in enumerate(shapes) if depth > limit}
    assert set(too_deep(batch, limit, skip=skip)) == expected


@given(st.lists(st.binary(max_size=12) | st.sampled_from([b"{}", b'{"a":1}', b"{\n}", b" {}", b"{\r}", b"", b"null"]),
                min_size=1, max_size=8))
def test_one_line_objects_holds_exactly_when_every_value_is_an_object_on_one_line(values: list[bytes]) -> None:
    """Arrow's reader gets the joined buffer only when each value starts with ``{`` and holds no line break:
    the same rule as the value-by-value path, decided without a Python step per value."""
    lines = Lines(values)
    assert lines.joined.split(b"\n") == values or any(b"\n" in v for v in values)
    expected = all(v[:1] == b"{" and b"\n" not in v and b"\r" not in v for v in values)
    assert lines.one_line_objects() == expected


@given(st.lists(st.binary(max_size=16), min_size=1, max_size=10))
def test_utf8_from_joined_lines_matches_value_by_value(values: list[bytes]) -> None:
    found = not_utf8(values, Lines(values))
    assert set(found) == {i for i, v in enumerate(values) if not _utf8(v)}


def _utf8(value: bytes) -> bool:
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
