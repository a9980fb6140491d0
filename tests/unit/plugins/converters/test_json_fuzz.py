"""Hypothesis against the JSON converters: whatever the bytes, the process lives and every value ends as a
row, a failure with its reason, or a null (a tombstone), exactly once."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tabletopic.convert.converter import ConvertResult
from tabletopic.convert.isolation import convert_isolating
from tabletopic_plugins.converters.json_converter import JsonConverter, _convert_schemaless
from tests.unit.fuzzing import examples

ODD_TEXT = st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from(["\ud800", "\udfff", "\x00", "\ufeff"]),
                   max_size=8)
SCALARS = (st.none() | st.booleans() | st.integers() | st.integers(min_value=2**63, max_value=2**70)
           | st.floats(allow_nan=True, allow_infinity=True) | ODD_TEXT)
VALUES = st.recursive(SCALARS, lambda kids: st.lists(kids, max_size=4) | st.dictionaries(ODD_TEXT, kids, max_size=4),
                      max_leaves=12)
LITERALS = st.sampled_from([b"NaN", b"-Infinity", b"1e400", b"123456789012345678901234567890", b'"\\ud800"',
                            b"null", b"[]", b"{}", b'{"a":1,"a":"x"}', b"\xff", b"\xc0\xaf", b""])


def serialized(value: object) -> bytes:
    return json.dumps(value, allow_nan=True).encode("utf-8", "surrogatepass")


def deep(depth: int) -> bytes:
    return b'{"k": ' + b"[" * depth + b"]" * depth + b"}"


@st.composite
def payloads(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["value", "object", "literal", "deep", "mutated", "enveloped"]))
    if kind == "value":
        return serialized(draw(VALUES))
    if kind == "object":
        return serialized(draw(st.dictionaries(ODD_TEXT, VALUES, max_size=5)))
    if kind == "literal":
        return draw(LITERALS)
    if kind == "deep":
        return deep(draw(st.sampled_from([999, 1000, 1001, 20_000])))
    if kind == "enveloped":
        schema = {"type": "struct", "fields": [{"field": "a", "type": draw(st.sampled_from(
            ["int64", "string", "float64", "boolean", "bytes", "struct"])), "optional": draw(st.booleans())}]}
        return serialized({"schema": schema, "payload": draw(st.none() | st.dictionaries(st.just("a"), VALUES))})
    data = bytearray(serialized(draw(st.dictionaries(ODD_TEXT, VALUES, max_size=3))))
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        at = draw(st.integers(min_value=0, max_value=max(0, len(data) - 1)))
        if data and draw(st.booleans()):
            data[at] ^= 1 << draw(st.integers(min_value=0, max_value=7))
        else:
            del data[at:]
    return bytes(data)


def every_index_once(result: ConvertResult, count: int) -> None:
    rows = [int(i) for part in result.parts for i in part.indexes]
    failed = [f.index for f in result.failures]
    seen = sorted(rows + failed + list(result.nulls))
    assert seen == list(range(count)), (rows, failed, result.nulls)
    assert all(f.reason.strip() for f in result.failures)
    for part in result.parts:
        assert part.table.num_rows == len(part.indexes)
        part.table.validate(full=True)  # what Arrow holds is well formed: UTF-8 strings, sound offsets


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(payloads(), min_size=1, max_size=12), st.booleans())
def test_json_converter_ends_every_value_once(batch: list[bytes], schemas_enable: bool) -> None:
    converter = JsonConverter()
    converter.configure({"schemas.enable": str(schemas_enable).lower()}, is_key=False)
    result = convert_isolating(lambda values: converter.convert("t", values), batch)
    every_index_once(result, len(batch))


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(["a", "b", "c"]), VALUES, max_size=3), min_size=1, max_size=12))
def test_a_batch_of_one_line_objects_reads_as_value_by_value(docs: list[dict]) -> None:
    """Schemaless objects on one line go to Arrow's reader as one buffer; they land as they do one by one."""
    batch = [json.dumps(d, separators=(",", ":")).encode() for d in docs]
    converter = JsonConverter()
    converter.configure({"schemas.enable": "false"}, is_key=False)
    fast, slow = converter.convert("t", batch), _convert_schemaless(batch)
    every_index_once(fast, len(batch))
    assert [f.index for f in fast.failures] == [f.index for f in slow.failures]
    # Compared as text: a NaN read from either path is the same value, yet not equal to itself.
    assert repr([p.table.to_pylist() for p in fast.parts]) == repr([p.table.to_pylist() for p in slow.parts])
