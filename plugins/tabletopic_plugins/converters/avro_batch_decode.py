"""A batch of Avro bodies decoded a field at a time for every record at once, with numpy.

fastavro decodes a record at a time into a dict, and Arrow then reads the dicts: about 4 µs a
record of seven plain fields, most of the daemon's Python time for an Avro topic. The binary
encoding is a sequence of fields with no framing, so one record's field cannot be found without
decoding the fields before it; but every record of a batch can take the same step at once. This
keeps one read position per record and advances them all, field by field: a varint is read a
byte position at a time over the records still reading it, a string is gathered from its
records' positions, a double is eight bytes viewed as one. The columns come out in the ``wire``
types of ``avro_arrow`` (logical types as their integers or bytes), for its ``finish``.

It reads records, enums, fixed, the primitive types, arrays, maps and unions of null with one of
them. A schema with a union of several types or a logical type fastavro would still convert is
left to fastavro (``batch_decoder`` returns None). A batch is given back (``table``
returns None) whenever a record does not end where its body ends, a varint runs past ten bytes
or 64 bits, an int does not fit 32 bits, a boolean is neither 0 nor 1, a length is negative or
runs past its body, a union or enum index is out of range, a string is not UTF-8, a block holds
more than 256 items or a map a key twice: fastavro then decodes the batch a record at a time and
fails the bad records alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from tabletopic_plugins.converters.map_keys import repeats_a_key

# A field step: (the records' positions, their bodies' ends) -> (the column, the positions after it).
Step = Callable[[np.ndarray, np.ndarray], tuple[pa.Array, np.ndarray]]
_PAD = 16  # zero bytes after the data: a read past the last body stays in the array, and is then refused


class _Unsupported(Exception):
    """The schema holds a type this decoder leaves to fastavro."""


class _Refused(Exception):
    """A record in the batch is not one this decoder reads exactly as fastavro would."""


class BatchDecoder:
    """One schema's field steps. It decodes one batch at a time (its converter's, on the event loop):
    the steps read the batch's bytes from it while ``table`` runs."""

    def __init__(self, fields: list[tuple[str, Step]], wire: pa.Schema) -> None:
        self._fields = fields
        self._wire = wire
        self._data = np.zeros(0, dtype=np.uint8)

    def table(self, values: Sequence[bytes], skip: int) -> pa.Table | None:
        """The values' bodies, each ``skip`` bytes in (after its header), as a table of ``avro_arrow``'s wire
        schema, or None when fastavro must read them."""
        lengths = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
        ends = np.cumsum(lengths)
        positions = ends - lengths + skip
        self._data = np.frombuffer(b"".join([*values, bytes(_PAD)]), dtype=np.uint8)
        try:
            columns = []
            for _, step in self._fields:
                column, positions = step(positions, ends)
                columns.append(column)
            if not np.array_equal(positions, ends):
                raise _Refused("a record does not end where its body ends")
            return pa.Table.from_arrays(columns, schema=self._wire)
        except (_Refused, pa.ArrowException, ValueError, IndexError, OverflowError):
            return None  # the last three only if a check above missed a case: fastavro decides
        finally:
            self._data = np.zeros(0, dtype=np.uint8)

    # Readers over self._data, for the records at ``positions``.

    def varint(self, positions: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Zig-zag varints (Avro's int and long): their values and the positions after them."""
        data = self._data
        value = np.zeros(len(positions), dtype=np.uint64)
        after = positions.copy()
        reading = np.arange(len(positions))
        for byte_index in range(10):
            if not len(reading):
                break
            where = after[reading]
            if (where >= ends[reading]).any():
                raise _Refused("a varint runs past its body")
            byte = data[where].astype(np.uint64)
            if byte_index == 9 and (byte > 1).any():
                raise _Refused("a varint past 64 bits")
            value[reading] |= (byte & np.uint64(0x7F)) << np.uint64(7 * byte_index)
            after[reading] += 1
            reading = reading[byte >= 0x80]
        if len(reading):
            raise _Refused("a varint longer than ten bytes")
        signed = (value >> np.uint64(1)).astype(np.int64) ^ -(value & np.uint64(1)).astype(np.int64)
        return signed, after

    def fixed_bytes(self, positions: np.ndarray, ends: np.ndarray, size: int) -> np.ndarray:
        if (positions + size > ends).any():
            raise _Refused("a fixed-size value runs past its body")
        return self._data[positions[:, None] + np.arange(size)]

    def blobs(self, positions: np.ndarray, sizes: np.ndarray, kind: pa.DataType) -> pa.Array:
        """Binary or string values of ``sizes`` bytes at ``positions``."""
        offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        if offsets[-1] >= 2**31:
            raise _Refused("a batch of more than 2 GiB of strings")
        starts = np.repeat(positions - offsets[:-1], sizes) + np.arange(offsets[-1])
        data = self._data[starts]
        array = pa.Array.from_buffers(kind, len(sizes), [None, pa.py_buffer(offsets.astype(np.int32)),
                                                         pa.py_buffer(data)])
        if kind == pa.string():
            array.validate(full=True)  # UTF-8: ArrowInvalid gives the batch to fastavro
        return array


def batch_decoder(parsed: dict[str, Any], wire: pa.Schema) -> BatchDecoder | None:
    """A decoder for records of fastavro's ``parsed`` schema (``avro_arrow.raw_schema``'s) into ``wire``,
    or None if the schema holds a type it leaves to fastavro."""
    if parsed.get("type") != "record":
        return None
    named = parsed.get("__named_schemas", {})
    decoder = BatchDecoder([], wire)
    try:
        decoder._fields = [(f["name"], _step(decoder, f["type"], named, wire.field(f["name"]).type))
                           for f in parsed["fields"]]
    except Exception:  # _Unsupported, or a schema shape not foreseen here: fastavro reads it
        return None
    return decoder


def _step(decoder: BatchDecoder, node: Any, named: dict[str, Any], wire: pa.DataType) -> Step:
    if isinstance(node, str) and node in named:
        node = named[node]
    if isinstance(node, list):
        return _optional(decoder, node, named, wire)
    kind = node if isinstance(node, str) else node.get("type")
    if isinstance(node, dict) and "logicalType" in node:
        raise _Unsupported(f"logical type {node['logicalType']} on {kind}")
    if kind == "record":
        children = [(f["name"], _step(decoder, f["type"], named, wire.field(f["name"]).type)) for f in node["fields"]]
        return _record(children, wire)
    if kind == "enum":
        return _enum(decoder, list(node["symbols"]))
    if kind == "array":
        item_wire = wire.value_type
        return _array(decoder, _step(decoder, node["items"], named, item_wire), item_wire, wire)
    if kind == "map":
        value_wire = wire.item_type
        return _map(decoder, _step(decoder, node["values"], named, value_wire), value_wire, wire)
    if kind == "fixed":
        size = int(node["size"])

        def fixed(positions: np.ndarray, ends: np.ndarray) -> tuple[pa.Array, np.ndarray]:
            after = _checked(positions + size, ends)
            return decoder.blobs(positions, np.full(len(positions), size), pa.binary()), after
        return fixed
    primitive = _PRIMITIVES.get(kind) if isinstance(kind, str) else None
    if primitive is None:
        raise _Unsupported(f"type {kind}")
    return primitive(decoder)


def _checked(after: np.ndarray, ends: np.ndarray) -> np.ndarray:
    if (after > ends).any():
        raise _Refused("a value runs past its body")
    return after


def _long(decoder: BatchDecoder) -> Step:
    def step(positions: np.ndarray, ends: np.ndarray) -> tuple[pa.Array, np.ndarray]:
        values, after = decoder.varint(positions, ends)
        return pa.array(values, pa.int64()), after
    return step


def _int(decoder: BatchDecoder) -> Step:
    def step(positions: np.ndarray, ends: np.ndarray) -> tuple[pa.Array, np.ndarray]:
        values, after = decoder.varint(positions, ends)
        if len(values) and (values.min() < -2**31 or values.max() >= 2**31):
            raise _Refused("an int past 32 bits")
        return pa.array(values.astype(np.int32), pa.int32()), after
    return step


def _floating(size: int, dtype: Any, kind: pa.DataType) -> Callable[[BatchDecoder], Step]:
    def make(decoder: BatchDecoder) -> Step:
        def step(positions: np.ndarray, ends: np.ndarray) -> tuple[pa.Array, np.ndarray]:
            raw = decoder.fixed_bytes(positions, ends, size)
            return pa.array(np.ascontiguousarray(raw).view(dtype).reshape(-1), kind), positions + size
        return step
    return make


def _boolean(decoder: BatchDecoder) -> Step:
    def step(positions: np.ndarray, ends: np.ndarray) -> tuple[pa.Array, np.ndarray]:
        raw = decoder.fixed_bytes(positions, ends, 1).reshape(-1)
        if (raw > 1).any():
            raise _Refused("a boolean that is neither 0 nor 1")
        return pa.array(raw.astype(bool), pa.bool_()), positions + 1
    return step


def _blob(kind: pa.DataType) -> Callable[[BatchDecoder], Step]:
    def make(decoder: BatchDecoder) -> Step:
        def step(positions: np.ndarray, ends: np.ndarray) -> tuple[pa.Array, np.ndarray]:
            sizes, starts = decoder.varint(positions, ends)
            if (sizes < 0).any():
                raise _Refused("a negative length")
            after = _checked(starts + sizes, ends)
            return decoder.blobs(starts, sizes, kind), after
        return step
    return make


def _null(decoder: BatchDecoder) -> Step:
    return lambda positions, ends: (pa.nulls(len(positions), pa.string()), positions)


_PRIMITIVES: dict[str, Callable[[BatchDecoder], Step]] = {
    "null": _null, "boolean": _boolean, "int": _int, "long": _long,
    "float": _floating(4, "<f4", pa.float32()), "double": _floating(8, "<f8", pa.float64()),
    "bytes": _blob(pa.binary()), "string": _blob(pa.string())}


def _record(children: list[tuple[str, Step]], wire: pa.DataType) -> Step:
    def step(positions: np.ndarray, ends: np.ndarray) -> tuple[pa.Array, np.ndarray]:
        arrays = []
        for _, child in children:
            array, positions = child(positions, ends)
            arrays.append(array)
        if not arrays:
            return pa.array([{}] * len(positions), wire), positions
        return pa.StructArray.from_arrays(arrays, fields=list(wire)), positions
    return step


def _enum(decoder: BatchDecoder, symbols: list[str]) -> Step:
    names = pa.array(symbols, pa.string())

    def step(positions: np.ndarray, ends: np.ndarray) -> tuple[pa.Array, np.ndarray]:
        indexes, after = decoder.varint(positions, ends)
        if len(indexes) and (indexes.min() < 0 or indexes.max() >= len(symbols)):
            raise _Refused("an enum index out of range")
        return names.take(pa.array(indexes)), after
    return step


_MAX_ITEMS = 256  # items in one block: past this, a numpy step per item costs more than fastavro's loop
Items = Callable[[np.ndarray, np.ndarray], tuple[list[pa.Array], np.ndarray, np.ndarray]]


def _blocks(decoder: BatchDecoder, items: list[tuple[Step, pa.DataType]]) -> Items:
    """Avro's blocks of items (an array's, or a map's keys and values): for the records at ``positions``,
    each part of every item in record order, each record's item count, and the positions after the
    blocks. Items are read one index at a time over the records that still have that many."""

    def read(positions: np.ndarray, ends: np.ndarray) -> tuple[list[pa.Array], np.ndarray, np.ndarray]:
        after = positions.copy()
        counts = np.zeros(len(positions), dtype=np.int64)
        pieces: list[list[pa.Array]] = [[] for _ in items]
        rows: list[np.ndarray] = []
        sequence: list[np.ndarray] = []
        reading = np.arange(len(positions))
        while len(reading):
            count, after[reading] = decoder.varint(after[reading], ends[reading])
            sized = count < 0
            if sized.any():  # a negative count: that many items, after the block's size in bytes
                sizes, after[reading[sized]] = decoder.varint(after[reading[sized]], ends[reading[sized]])
                if (sizes < 0).any():
                    raise _Refused("a negative block size")
                count = np.abs(count)
            if (count < 0).any() or (count > _MAX_ITEMS).any():
                raise _Refused(f"a block of more than {_MAX_ITEMS} items")
            reading, count = reading[count > 0], count[count > 0]
            current, left = reading, count
            while len(current):
                for part, (step, _) in zip(pieces, items, strict=True):
                    values, after[current] = step(after[current], ends[current])
                    part.append(values)
                rows.append(current)
                sequence.append(counts[current].copy())
                counts[current] += 1
                left = left - 1
                current, left = current[left > 0], left[left > 0]
        if not rows:
            return [pa.array([], kind) for _, kind in items], counts, after
        order = pa.array(np.lexsort((np.concatenate(sequence), np.concatenate(rows))))
        return [pa.concat_arrays(part).take(order) for part in pieces], counts, after

    return read


def _offsets(counts: np.ndarray) -> pa.Array:
    offsets = np.zeros(len(counts) + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    return pa.array(offsets, pa.int32())


def _array(decoder: BatchDecoder, item: Step, item_wire: pa.DataType, wire: pa.DataType) -> Step:
    read = _blocks(decoder, [(item, item_wire)])

    def step(positions: np.ndarray, ends: np.ndarray) -> tuple[pa.Array, np.ndarray]:
        (values,), counts, after = read(positions, ends)
        return pa.ListArray.from_arrays(_offsets(counts), values, type=wire), after
    return step


def _map(decoder: BatchDecoder, value: Step, value_wire: pa.DataType, wire: pa.DataType) -> Step:
    read = _blocks(decoder, [(_blob(pa.string())(decoder), pa.string()), (value, value_wire)])

    def step(positions: np.ndarray, ends: np.ndarray) -> tuple[pa.Array, np.ndarray]:
        (keys, values), counts, after = read(positions, ends)
        if repeats_a_key(counts, keys):
            raise _Refused("a map key written twice")
        return pa.MapArray.from_arrays(_offsets(counts), keys, values, type=wire), after
    return step


def _optional(decoder: BatchDecoder, branches: list[Any], named: dict[str, Any], wire: pa.DataType) -> Step:
    """A union of null and one type: the value where the branch is that type, null elsewhere."""
    if len(branches) != 2 or branches.count("null") != 1:
        raise _Unsupported("a union of several types")
    null_branch = branches.index("null")
    inner = _step(decoder, branches[1 - null_branch], named, wire)

    def step(positions: np.ndarray, ends: np.ndarray) -> tuple[pa.Array, np.ndarray]:
        chosen, after = decoder.varint(positions, ends)
        if ((chosen != 0) & (chosen != 1)).any():
            raise _Refused("a union index out of range")
        present = chosen != null_branch
        values, after_values = inner(after[present], ends[present])
        after[present] = after_values
        # Each record's place among the present ones, or null: take() spreads the values with nulls between.
        where = np.cumsum(present) - 1
        return values.take(pa.array(where, mask=~present)), after
    return step
