"""The channel's reader: what it hands on, and what it skips without dying."""

from __future__ import annotations

import pytest

from tabletopic.commit.channel import Channel, ControlTopicShared
from tabletopic.commit.events import Start
from tabletopic.commit.fragments import encode
from tabletopic.kafka.clients import KafkaClients


def _channel() -> tuple[Channel, list[int]]:
    skipped: list[int] = []
    return Channel(KafkaClients(["127.0.0.1:1"], {}), "control", "c", on_skipped=lambda: skipped.append(1)), skipped


def test_bad_records_are_counted_and_skipped_and_good_ones_still_pass() -> None:
    channel, skipped = _channel()
    for i, value in enumerate([b"[" * 100_000, b"{}", b'"x"', None, b'{"v": 1, "connector": "c", "type": "x"}']):
        assert channel.accept(value, i) is None
    assert len(skipped) == 5
    start = Start("c", "r1", 1)
    assert channel.accept(encode(start)[0], 9) == start


def test_other_connectors_messages_are_ignored_quietly() -> None:
    channel, skipped = _channel()
    assert channel.accept(encode(Start("other", "r1", 1))[0], 0) is None
    assert channel.accept(b'{"v": 1, "connector": "other", "type": "x"}', 1) is None
    assert skipped == []


def test_a_fragmented_message_comes_out_whole() -> None:
    channel, _ = _channel()
    channel._max_bytes = 300
    message = Start("c", "r" * 900, 1)
    records = encode(message, 300)
    assert len(records) > 1
    out = [channel.accept(r, i) for i, r in enumerate(records)]
    assert out[-1] == message and out[:-1] == [None] * (len(records) - 1)


def java_sink_event() -> bytes:
    """An event as the Iceberg sink (Java) writes it: AvroEncoderUtil's magic, the schema as writeUTF, the datum."""
    schema = b'{"type":"record","name":"org.apache.iceberg.connect.events.Event","fields":[]}'
    return b"\xc2\x01" + len(schema).to_bytes(2, "big") + schema + b"\x00"


def test_a_java_sink_event_stops_the_reader_naming_the_control_topic_key() -> None:
    channel, skipped = _channel()
    with pytest.raises(ControlTopicShared, match=r"iceberg\.control\.topic"):
        channel.accept(java_sink_event(), 7)
    assert channel.accept(b"\xc2\x01 not an event", 8) is None and skipped == [1]  # garbage, skipped as any
