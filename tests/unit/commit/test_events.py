"""The wire format: round trips, fragments, and records that must be refused."""

from __future__ import annotations

import json

import pytest

from tabletopic.commit.events import Answer, Fragment, MessageError, Start, Verdict, decode
from tabletopic.commit.fragments import Reassembly, encode
from tabletopic.write.write_result import TableFiles
from tests.unit.fakes import TP0, TP1, answer, files


def test_every_message_survives_a_round_trip() -> None:
    messages = [
        Start("c", "r1", 3, "interval"),
        answer("a1", "r1", [TP0, TP1], {TP0: (0, 10)}, {"db.t": {TP0: 0}}, {"db.t": files("/wh/1.parquet")}, 3),
        Verdict("c", "r1", 3, ("a1",), {"a2": "why"}, {"db.t": {TP0: 10}}),
    ]
    for message in messages:
        [record] = encode(message)
        assert decode(record) == message


def test_an_answers_valid_through_timestamp_crosses_and_an_older_daemons_answer_has_none() -> None:
    through = TableFiles([{"file-path": "/wh/1", "content": "data"}], 1, 500, 10, 400)
    [record] = encode(answer("a1", "r1", [TP0], {TP0: (0, 10)}, {}, {"db.t": through}, 3))
    assert decode(record).tables["db.t"].valid_through_ms == 400
    doc = json.loads(record)
    del doc["tables"]["db.t"]["valid_through"]
    assert decode(json.dumps(doc).encode()).tables["db.t"].valid_through_ms is None


def test_a_large_answer_is_cut_into_fragments_that_reassemble() -> None:
    big = answer("a1", "r1", [TP0], {TP0: (0, 5000)}, {"db.t": {}},
                 {"db.t": files(*(f"/wh/data/bucket={i}/{'x' * 60}.parquet" for i in range(5000)))})
    records = encode(big, max_bytes=64 * 1024)
    assert len(records) > 5 and all(len(r) <= 64 * 1024 for r in records)
    whole = Reassembly()
    results = [whole.add(decode(r)) for r in records]  # type: ignore[arg-type]
    assert results[:-1] == [None] * (len(records) - 1)
    assert results[-1] == big


@pytest.mark.parametrize("value", [
    b"[" * 100_000,  # nests deeper than any parser allows
    b"",
    b"\xff\xfe",
    b"[]",
    b'"start"',
    b'{"v": 1, "type": "start", "connector": "c", "commit_id": "r", "epoch": -1}',
    b'{"v": 1, "type": "start", "connector": "c", "commit_id": "r", "epoch": 99999999999999}',
    b'{"v": 1, "type": "start", "connector": "c", "commit_id": 7, "epoch": 1}',
    b'{"v": 2, "type": "start", "connector": "c", "commit_id": "r", "epoch": 1}',
    b'{"v": 1, "type": "mystery", "connector": "c"}',
    b'{"v": 1, "type": "answer", "connector": "c", "answer_id": "a", "member": "m", "epoch": 1, "assigned": [],'
    b' "ranges": [["t", 0, 10, 5]], "floors": {}, "tables": {}}',
    b'{"v": 1, "type": "answer", "connector": "c", "answer_id": "a", "member": "m", "epoch": 1, "assigned": [["t"]],'
    b' "ranges": [], "floors": {}, "tables": {}}',
    b'{"v": 1, "type": "answer", "connector": "c", "answer_id": "a", "member": "m", "epoch": 1, "assigned": [],'
    b' "ranges": [], "floors": {}, "tables": {"db.t": {"files": [{"no-path": 1}], "records": 1}}}',
    b'{"v": 1, "type": "verdict", "connector": "c", "commit_id": "r", "epoch": 1, "accepted": [1], "rejected": {},'
    b' "offsets": {}}',
])
def test_records_that_are_not_valid_messages_are_refused(value: bytes) -> None:
    with pytest.raises(MessageError):
        decode(value)


def test_fragments_that_do_not_form_a_message_are_refused() -> None:
    whole = Reassembly()
    assert whole.add(Fragment("c", "m1", 0, 2, '{"v": 1, "type": ')) is None
    with pytest.raises(MessageError):
        whole.add(Fragment("c", "m1", 1, 2, '"start"'))


def test_incomplete_fragments_do_not_pile_up() -> None:
    whole = Reassembly(max_pending=3)
    for i in range(100):
        whole.add(Fragment("c", f"m{i}", 0, 2, "{"))
    assert len(whole._parts) <= 3


def test_an_answer_keeps_its_id_when_sent_to_another_round() -> None:
    first = answer("a1", "r1", [TP0], {TP0: (0, 10)}, epoch=1)
    again = first.to("r2", 2, frozenset({TP0, TP1}))
    assert (again.answer_id, again.commit_id, again.epoch, again.ranges) == ("a1", "r2", 2, first.ranges)
    assert isinstance(again, Answer)
    assert json.loads(encode(again)[0])["answer_id"] == "a1"
