"""Whether a batch of maps, decoded from a wire format straight into Arrow, writes a key twice in one map.

Avro and Protobuf both allow it on the wire, and both say the last entry wins. A decoder that
reads record by record into dicts keeps one entry a key; one that reads a batch into Arrow keeps
every entry. The batch decoders ask this and give such a batch to the record-by-record path.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def repeats_a_key(lengths: np.ndarray, keys: pa.Array) -> bool:
    """``lengths[i]`` entries per map, their keys flat in order in ``keys``."""
    several = lengths > 1
    if not several.any():
        return False
    # From the lengths, not pc.list_parent_indices: on a map array that aborts the process (pyarrow 26).
    rows = np.repeat(np.arange(len(lengths)), lengths)
    pairs = pa.table({"row": rows, "key": keys}).filter(np.repeat(several, lengths))
    return pairs.group_by(["row", "key"]).aggregate([]).num_rows != pairs.num_rows
