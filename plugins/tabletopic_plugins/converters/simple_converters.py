"""Connect's StringConverter and ByteArrayConverter: the whole payload becomes one ``value`` column."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa

from tabletopic.convert.converter import ConvertResult, Failure


class StringConverter:
    """``org.apache.kafka.connect.storage.StringConverter`` (UTF-8, as Connect's default encoding)."""

    def configure(self, props: Mapping[str, str], is_key: bool) -> None:
        encoding = props.get("converter.encoding", "UTF-8").upper().replace("_", "-")
        if encoding not in ("UTF-8", "UTF8"):
            raise ValueError(f"converter.encoding={encoding!r}: only UTF-8 is supported")

    def convert(self, topic: str, data: Sequence[bytes]) -> ConvertResult:
        return _primitive(self._convert(data))

    def _convert(self, data: Sequence[bytes]) -> ConvertResult:
        binary = pa.array(data, pa.binary())
        try:  # Arrow validates UTF-8 while casting; only a failing batch is checked record by record
            return ConvertResult.single(pa.table({"value": binary.cast(pa.string())}), np.arange(len(data)))
        except pa.ArrowInvalid:
            pass
        ok = np.ones(len(data), dtype=bool)
        for i, value in enumerate(data):
            try:
                value.decode("utf-8")
            except UnicodeDecodeError:
                ok[i] = False
        indexes = np.flatnonzero(ok)
        result = ConvertResult.single(pa.table({"value": binary.filter(pa.array(ok)).cast(pa.string())}), indexes)
        result.failures.extend(Failure(int(i), "value is not valid UTF-8") for i in np.flatnonzero(~ok))
        return result


class ByteArrayConverter:
    """``org.apache.kafka.connect.converters.ByteArrayConverter``."""

    def configure(self, props: Mapping[str, str], is_key: bool) -> None:
        pass

    def convert(self, topic: str, data: Sequence[bytes]) -> ConvertResult:
        return _primitive(ConvertResult.single(pa.table({"value": pa.array(data, pa.binary())}), np.arange(len(data))))


def _primitive(result: ConvertResult) -> ConvertResult:
    """Each payload is one value, not a struct: single message transforms treat it as Connect's primitive."""
    for part in result.parts:
        part.primitive = True
    return result
