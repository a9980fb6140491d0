"""Rebuild a struct or list array around new children, keeping its nulls.

Converting a nested column (finishing wire types, conforming to a table) means
converting its children and putting the parent back together. The list case
has a trap worth having once: ``flatten()`` starts at the first offset of a
sliced array, so the offsets must be rebased on it.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc


def struct_with(array: pa.StructArray, children: Sequence[pa.Array], fields: Sequence[pa.Field]) -> pa.StructArray:
    """``array``'s nulls around ``children`` (one per field, in order)."""
    return pa.StructArray.from_arrays(list(children), fields=list(fields), mask=array.is_null())


def list_with(array: pa.Array, values: pa.Array, type_: pa.ListType) -> pa.ListArray:
    """``array``'s lengths and nulls around ``values``, which replace ``array.flatten()``."""
    offsets = pc.subtract(array.offsets, array.offsets[0]).cast(pa.int32())
    return pa.ListArray.from_arrays(offsets, values, type=type_, mask=array.is_null())
