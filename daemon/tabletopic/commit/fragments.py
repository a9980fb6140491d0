"""Control messages too large for one Kafka record travel as fragments, reassembled by every reader.

A message longer than ``max_bytes`` is cut into slices of its JSON text, each
wrapped in a small ``fragment`` record, so an answer never depends on the topic's
or the broker's ``max.message.bytes`` (one for a table with thousands of partitions
easily passes 1 MB).  A reader keeps a bounded number of incomplete messages.
"""

from __future__ import annotations

import json
import math
import uuid

from tabletopic.commit.events import MAX_FRAGMENTS, VERSION, Fragment, Message, MessageError, from_json, to_json

# Under the broker's default max.message.bytes (1 MiB) with room for the envelope.
DEFAULT_MAX_BYTES = 900 * 1024


def encode(message: Message, max_bytes: int = DEFAULT_MAX_BYTES) -> list[bytes]:
    """One record, or fragments of at most about ``max_bytes`` each when the message is larger."""
    body = json.dumps(to_json(message), separators=(",", ":"))
    raw = body.encode()
    if len(raw) <= max_bytes:
        return [raw]
    # Cut the text, not the bytes, so each fragment is valid JSON; a character is at most 4 bytes.
    step = max(1, (max_bytes - 256) // 4)
    count = math.ceil(len(body) / step)
    if count > MAX_FRAGMENTS:
        raise MessageError(f"a control message of {len(raw)} bytes needs more than {MAX_FRAGMENTS} fragments")
    message_id = uuid.uuid4().hex
    return [json.dumps({"v": VERSION, "type": "fragment", "connector": message.connector, "message_id": message_id,
                        "index": i, "count": count, "body": body[i * step:(i + 1) * step]},
                       separators=(",", ":")).encode() for i in range(count)]


class Reassembly:
    """Collects fragments until a message is whole; bounded, so fragments that never complete cannot pile up."""

    def __init__(self, max_pending: int = 64) -> None:
        self._parts: dict[str, dict[int, str]] = {}
        self._max_pending = max_pending

    def add(self, fragment: Fragment) -> Message | None:
        parts = self._parts.setdefault(fragment.message_id, {})
        parts[fragment.index] = fragment.body
        if len(self._parts) > self._max_pending:
            self._parts.pop(next(iter(self._parts)))  # the oldest incomplete message is given up
        if len(parts) < fragment.count:
            return None
        del self._parts[fragment.message_id]
        try:
            whole = "".join(parts[i] for i in range(fragment.count))
            message = from_json(json.loads(whole))
        except (KeyError, ValueError, RecursionError) as exc:
            raise MessageError(f"fragments of {fragment.message_id} do not form a message: {str(exc)[:80]}") from None
        if isinstance(message, Fragment) or message.connector != fragment.connector:
            raise MessageError("a fragment may only carry a message of its own connector")
        return message
