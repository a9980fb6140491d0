"""errors.tolerance and the dead-letter topic, as Connect handles a record that failed a stage: the first
failure stops the connector under ``none``; under ``all`` each goes to the dead-letter topic as it came in,
with Connect's ``__connect.errors.*`` headers, and one too large for that topic goes without its value."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiokafka.errors import MessageSizeTooLargeError
from prometheus_client import CollectorRegistry

from tabletopic.config.connector import parse_connector
from tabletopic.config.worker import parse_worker
from tabletopic.convert.records import RawRecords
from tabletopic.observe.metrics import SinkMetrics
from tabletopic.stage.failed_records import ErrorSettings, FailedRecords, RecordFailed, RecordFailure

DLQ = "dead"


class FakeProducer:
    """Takes sends into ``sent``; a value over ``max_bytes`` is refused as the client (or, with ``by_broker``,
    the broker) refuses it."""

    def __init__(self, max_bytes: int = 1 << 20, by_broker: bool = False) -> None:
        self.sent: list[dict[str, Any]] = []
        self.max_bytes, self.by_broker = max_bytes, by_broker

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def send(self, topic: str, **record: Any) -> asyncio.Future[object]:
        future: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        if len(record["value"] or b"") > self.max_bytes:
            if not self.by_broker:
                raise MessageSizeTooLargeError()
            future.set_exception(MessageSizeTooLargeError())
            return future
        self.sent.append({"topic": topic, **record})
        future.set_result(None)
        return future


class FakeAdmin:
    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def list_topics(self) -> set[str]:
        return {DLQ}


class FakeClients:
    def __init__(self, producer: FakeProducer) -> None:
        self.made = producer

    def kwargs(self, role: str) -> dict[str, Any]:
        return {}

    def admin(self) -> FakeAdmin:
        return FakeAdmin()

    def producer(self, **kwargs: Any) -> FakeProducer:
        return self.made


def failed_records(producer: FakeProducer, **props: str) -> tuple[FailedRecords, CollectorRegistry]:
    config = parse_connector({"name": "c", "topics": "t", "iceberg.tables": "db.t", "iceberg.catalog.type": "hadoop",
                              "iceberg.catalog.warehouse": "file:///tmp/w", **props},
                             parse_worker({"bootstrap.servers": "127.0.0.1:9"}))
    registry = CollectorRegistry()
    return FailedRecords(ErrorSettings.of(config), SinkMetrics(registry, "c"), FakeClients(producer)), registry


def raw(n: int = 4) -> RawRecords:
    return RawRecords("t", 3, list(range(100, 100 + n)), [1_000 + i for i in range(n)],
                      [f"k{i}".encode() for i in range(n)], [f"v{i}".encode() for i in range(n)],
                      [[("h", f"{i}".encode())] for i in range(n)])


TOLERANT = {"errors.tolerance": "all", "errors.deadletterqueue.topic.name": DLQ,
            "errors.deadletterqueue.context.headers.enable": "true"}


def test_under_tolerance_none_the_first_failure_by_position_stops_the_connector() -> None:
    records, registry = failed_records(FakeProducer())
    failures = [RecordFailure("transform", 2, "no field x"), RecordFailure("convert", 1, "not JSON")]
    with pytest.raises(RecordFailed) as raised:
        asyncio.run(records.handle(raw(), failures))
    assert (raised.value.topic, raised.value.partition, raised.value.offset) == ("t", 3, 101)
    assert "failed in convert: not JSON" in str(raised.value) and "errors.tolerance=all" in str(raised.value)
    for stage in ("convert", "transform"):
        assert registry.get_sample_value("tabletopic_failed_records_total", {"connector": "c", "stage": stage}) == 1


def test_under_tolerance_all_each_failure_goes_to_the_dead_letter_topic_as_it_came_with_connects_headers() -> None:
    producer = FakeProducer()
    records, registry = failed_records(producer, **TOLERANT)

    async def go() -> None:
        await records.start()
        await records.handle(raw(), [RecordFailure("transform", 3, "bad"), RecordFailure("convert", 0, "not JSON")])
    asyncio.run(go())
    assert [(s["key"], s["value"], s["timestamp_ms"]) for s in producer.sent] == [(b"k0", b"v0", 1000),
                                                                                 (b"k3", b"v3", 1003)]
    headers = dict(producer.sent[0]["headers"])
    assert producer.sent[0]["headers"][0] == ("h", b"0")  # the record's own headers first
    assert headers["__connect.errors.topic"] == b"t" and headers["__connect.errors.partition"] == b"3"
    assert headers["__connect.errors.offset"] == b"100" and headers["__connect.errors.stage"] == b"VALUE_CONVERTER"
    assert headers["__connect.errors.exception.message"] == b"not JSON"
    assert dict(producer.sent[1]["headers"])["__connect.errors.stage"] == b"TRANSFORMATION"
    assert registry.get_sample_value("tabletopic_dead_letter_records_total", {"connector": "c"}) == 2


def test_without_context_headers_only_the_records_own_headers_go() -> None:
    producer = FakeProducer()
    records, _ = failed_records(producer, **{**TOLERANT, "errors.deadletterqueue.context.headers.enable": "false"})

    async def go() -> None:
        await records.start()
        await records.handle(raw(), [RecordFailure("schema", 1, "type")])
    asyncio.run(go())
    assert producer.sent[0]["headers"] == [("h", b"1")]


@pytest.mark.parametrize("by_broker", [False, True], ids=["the client refuses", "the broker refuses"])
def test_a_record_too_large_for_the_dead_letter_topic_goes_without_its_value(by_broker: bool) -> None:
    producer = FakeProducer(max_bytes=1, by_broker=by_broker)
    records, _ = failed_records(producer, **TOLERANT)

    async def go() -> None:
        await records.start()
        await records.handle(raw(), [RecordFailure("convert", 2, "not JSON")])
    asyncio.run(go())
    (sent,) = producer.sent
    headers = dict(sent["headers"])
    assert sent["value"] is None and sent["key"] == b"k2"
    assert headers["__tabletopic.errors.value.dropped.bytes"] == b"2"
    assert headers["__tabletopic.errors.source"] == b"t[3]@102"


def test_under_tolerance_all_without_a_topic_the_failure_is_counted_and_nothing_is_sent() -> None:
    producer = FakeProducer()
    records, registry = failed_records(producer, **{"errors.tolerance": "all"})

    async def go() -> None:
        await records.start()
        await records.handle(raw(), [RecordFailure("route", 1, "no table")])
    asyncio.run(go())
    assert producer.sent == []
    assert registry.get_sample_value("tabletopic_failed_records_total", {"connector": "c", "stage": "route"}) == 1
    assert not registry.get_sample_value("tabletopic_dead_letter_records_total", {"connector": "c"})
