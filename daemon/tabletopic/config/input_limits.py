"""The bounds a record must meet before it is parsed: how large, and for JSON, how deeply nested.

The size bound is a connector key (``tabletopic.input.max-value-bytes``); the nesting
bound is a property of the JSON converters (``value.converter.max.nesting.depth``), as
Connect's converters take their own settings. ``convert/input_guard.py`` applies them.
"""

from __future__ import annotations

from collections.abc import Mapping

DEFAULT_MAX_NESTING_DEPTH = 1000  # Jackson's StreamReadConstraints default, under Connect's JsonConverter
NESTING_DEPTH_KEY = "max.nesting.depth"
DEFAULT_MAX_VALUE_BYTES = 16 * 1024 * 1024
_MOST_NESTING = 10_000  # past this the parsers' own recursion would be the bound, and that is a crash


def setting_name(is_key: bool) -> str:
    return f"{'key' if is_key else 'value'}.converter.{NESTING_DEPTH_KEY}"


def nesting_limit(props: Mapping[str, str]) -> int:
    """A JSON converter's ``max.nesting.depth`` property, validated."""
    raw = props.get(NESTING_DEPTH_KEY)
    if raw is None or str(raw).strip() == "":
        return DEFAULT_MAX_NESTING_DEPTH
    try:
        limit = int(str(raw).strip())
    except ValueError:
        raise ValueError(f"{NESTING_DEPTH_KEY} must be a whole number, got {raw!r}") from None
    if not 1 <= limit <= _MOST_NESTING:
        raise ValueError(f"{NESTING_DEPTH_KEY} must be between 1 and {_MOST_NESTING}, got {limit}")
    return limit
