"""The control topic's wire format: what workers and the coordinator say, and how it is encoded.

Three messages cross the topic (the protocol is in ``docs/design/exactly-once.md``):

* :class:`Start` - the coordinator opens a round;
* :class:`Answer` - a worker's files per table, the offset ranges they cover and the
  floors their rows were cut against;
* :class:`Verdict` - which answers the coordinator committed or rejected, and what each
  table records afterwards.

Each is one JSON object with ``"v": 1``, its ``type`` and the connector's name, so
connectors can share a topic.  Data and delete files travel as Iceberg's own JSON form
of a content file (the REST catalog spec's ``ContentFile``, written and parsed by
Iceberg's ``ContentFileParser``); nothing is Java-serialised.  A large message travels
as :class:`Fragment` s (see :mod:`tabletopic.commit.fragments`).

Anyone may write to the topic, so :func:`decode` trusts nothing: a record that does
not parse or validate raises :class:`MessageError` and is skipped by the reader.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tabletopic.core.topic_partition import TopicPartition
from tabletopic.write.write_result import TableFiles

VERSION = 1
MAX_FRAGMENTS = 4096
_MAX_EPOCH = 2**31 - 1  # a Kafka group generation is an int32
_MAX_TEXT = 1024


class MessageError(ValueError):
    """A control record that is not a valid message of this version."""


# The Iceberg sink (Java) writes its events with Iceberg's AvroEncoderUtil: these two bytes, then the
# Avro schema as Java's writeUTF, then the datum.
JAVA_SINK_MAGIC = b"\xc2\x01"


def java_sink_event(value: bytes | None) -> bool:
    """Whether a control record is the Iceberg sink's (Java) own: an Avro event, not one of these messages."""
    return value is not None and value[:2] == JAVA_SINK_MAGIC and b"iceberg.connect" in value[:4096]


@dataclass(frozen=True)
class Start:
    connector: str
    commit_id: str
    epoch: int
    reason: str = "interval"


@dataclass
class Answer:
    connector: str
    answer_id: str
    commit_id: str | None  # the round answered, or None for an unsolicited flush
    member: str
    epoch: int
    assigned: frozenset[TopicPartition]
    ranges: dict[TopicPartition, tuple[int, int]] = field(default_factory=dict)  # [first, next) per partition
    # Per table, the offsets it recorded when the rows were cut, for every partition in ranges.
    floors: dict[str, dict[TopicPartition, int]] = field(default_factory=dict)
    tables: dict[str, TableFiles] = field(default_factory=dict)

    @property
    def carries(self) -> bool:
        return bool(self.ranges or self.tables)

    def to(self, commit_id: str | None, epoch: int, assigned: frozenset[TopicPartition]) -> Answer:
        """The same answer (same id), addressed to another round."""
        return Answer(self.connector, self.answer_id, commit_id, self.member, epoch, assigned, self.ranges,
                      self.floors, self.tables)


@dataclass(frozen=True)
class Verdict:
    connector: str
    commit_id: str
    epoch: int
    accepted: tuple[str, ...]
    rejected: dict[str, str]
    offsets: dict[str, dict[TopicPartition, int]]  # per table, what it records after this round


Message = Start | Answer | Verdict


@dataclass(frozen=True)
class Fragment:
    connector: str
    message_id: str
    index: int
    count: int
    body: str


# -- encoding ---------------------------------------------------------------------------------------

def _tps(tps: Any) -> list[list[Any]]:
    return [[t, p] for t, p in sorted(tps)]


def _offsets(offsets: dict[TopicPartition, int]) -> list[list[Any]]:
    return [[t, p, o] for (t, p), o in sorted(offsets.items())]


def to_json(message: Message) -> dict[str, Any]:
    if isinstance(message, Start):
        return {"v": VERSION, "type": "start", "connector": message.connector, "commit_id": message.commit_id,
                "epoch": message.epoch, "reason": message.reason}
    if isinstance(message, Answer):
        return {"v": VERSION, "type": "answer", "connector": message.connector, "answer_id": message.answer_id,
                "commit_id": message.commit_id, "member": message.member, "epoch": message.epoch,
                "assigned": _tps(message.assigned),
                "ranges": [[t, p, a, b] for (t, p), (a, b) in sorted(message.ranges.items())],
                "floors": {t: _offsets(f) for t, f in message.floors.items()},
                "tables": {t: {"files": f.files, "records": f.records, "max_ts": f.max_timestamp_ms,
                                   "written_at": f.written_at_ms, "valid_through": f.valid_through_ms}
                           for t, f in message.tables.items()}}
    return {"v": VERSION, "type": "verdict", "connector": message.connector, "commit_id": message.commit_id,
            "epoch": message.epoch, "accepted": list(message.accepted), "rejected": dict(message.rejected),
            "offsets": {t: _offsets(o) for t, o in message.offsets.items()}}


# -- decoding ---------------------------------------------------------------------------------------

def _text(doc: dict[str, Any], key: str, limit: int = _MAX_TEXT) -> str:
    value = doc.get(key)
    if not isinstance(value, str) or len(value) > limit:
        raise MessageError(f"{key!r} is missing, not a string or too long")
    return value


def _int(value: Any, what: str, low: int = 0, high: int = 2**63 - 1) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise MessageError(f"{what} must be an integer in [{low}, {high}]")
    return value


def _tp(item: Any, what: str) -> TopicPartition:
    if not isinstance(item, list) or len(item) < 2 or not isinstance(item[0], str) or not item[0]:
        raise MessageError(f"{what}: expected [topic, partition, ...]")
    return item[0], _int(item[1], f"{what} partition", 0, 2**31 - 1)


def _offset_map(items: Any, what: str, low: int = 0) -> dict[TopicPartition, int]:
    if not isinstance(items, list):
        raise MessageError(f"{what} must be a list")
    out = {}
    for item in items:
        tp = _tp(item, what)
        if len(item) != 3:
            raise MessageError(f"{what}: expected [topic, partition, offset]")
        out[tp] = _int(item[2], f"{what} offset", low)
    return out


def _epoch(doc: dict[str, Any]) -> int:
    return _int(doc.get("epoch"), "epoch", 0, _MAX_EPOCH)


def _table_files(table: str, doc: Any) -> TableFiles:
    if not isinstance(doc, dict):
        raise MessageError(f"tables[{table!r}] must be an object")
    files = doc.get("files")
    if not isinstance(files, list) or not all(isinstance(f, dict) and isinstance(f.get("file-path"), str)
                                              for f in files):
        raise MessageError(f"tables[{table!r}].files must be a list of content files")
    stamp = doc.get("max_ts")
    written = doc.get("written_at")
    through = doc.get("valid_through")  # absent from an answer of a daemon before it: no such summary key then
    return TableFiles(files, _int(doc.get("records"), "records"),
                      None if stamp is None else _int(stamp, "max_ts", -2**63),
                      None if written is None else _int(written, "written_at", 0),
                      None if through is None else _int(through, "valid_through", -2**63))


def _answer(doc: dict[str, Any], connector: str) -> Answer:
    commit_id = doc.get("commit_id")
    if commit_id is not None and not isinstance(commit_id, str):
        raise MessageError("commit_id must be a string or null")
    assigned = doc.get("assigned")
    if not isinstance(assigned, list):
        raise MessageError("assigned must be a list")
    raw_ranges = doc.get("ranges")
    if not isinstance(raw_ranges, list):
        raise MessageError("ranges must be a list")
    ranges = {}
    for item in raw_ranges:
        tp = _tp(item, "ranges")
        if len(item) != 4:
            raise MessageError("ranges: expected [topic, partition, first, next]")
        first, end = _int(item[2], "range start"), _int(item[3], "range end")
        if end <= first:
            raise MessageError(f"range {tp} is empty or backwards")
        ranges[tp] = (first, end)
    floors_doc, tables_doc = doc.get("floors"), doc.get("tables")
    if not isinstance(floors_doc, dict) or not isinstance(tables_doc, dict):
        raise MessageError("floors and tables must be objects")
    return Answer(connector, _text(doc, "answer_id"), commit_id, _text(doc, "member"), _epoch(doc),
                  frozenset(_tp(i, "assigned") for i in assigned), ranges,
                  {t: _offset_map(f, f"floors[{t!r}]", low=-1) for t, f in floors_doc.items()},
                  {t: _table_files(t, f) for t, f in tables_doc.items()})


def decode(value: bytes | None) -> Message | Fragment:
    """Parse one control record; :class:`MessageError` if it is not a valid message."""
    if not value:
        raise MessageError("empty record")
    try:
        doc = json.loads(value)
    except (ValueError, RecursionError) as exc:
        raise MessageError(f"not JSON: {str(exc)[:80]}") from None
    return from_json(doc)


def from_json(doc: Any) -> Message | Fragment:
    if not isinstance(doc, dict):
        raise MessageError("not a JSON object")
    if doc.get("v") != VERSION:
        raise MessageError(f"unknown version {doc.get('v')!r}")
    connector, kind = _text(doc, "connector"), doc.get("type")
    if kind == "start":
        return Start(connector, _text(doc, "commit_id"), _epoch(doc), str(doc.get("reason", ""))[:64])
    if kind == "answer":
        return _answer(doc, connector)
    if kind == "verdict":
        accepted, rejected, offsets = doc.get("accepted"), doc.get("rejected"), doc.get("offsets")
        if not isinstance(accepted, list) or not all(isinstance(a, str) for a in accepted):
            raise MessageError("accepted must be a list of answer ids")
        if not isinstance(rejected, dict) or not all(isinstance(v, str) for v in rejected.values()):
            raise MessageError("rejected must map answer ids to reasons")
        if not isinstance(offsets, dict):
            raise MessageError("offsets must be an object")
        return Verdict(connector, _text(doc, "commit_id"), _epoch(doc), tuple(accepted), dict(rejected),
                       {t: _offset_map(o, f"offsets[{t!r}]") for t, o in offsets.items()})
    if kind == "fragment":
        count = _int(doc.get("count"), "count", 2, MAX_FRAGMENTS)
        return Fragment(connector, _text(doc, "message_id"), _int(doc.get("index"), "index", 0, count - 1),
                        count, _text(doc, "body", 2**31))
    raise MessageError(f"unknown type {kind!r}")
