"""The status board: every worker's task, ours always current, others dropped after missed heartbeats."""

from __future__ import annotations

import json

from tabletopic.connectors.status_board import TaskStatus
from tabletopic.distributed.status_topic import _STALE_AFTER_S, StatusTopic
from tabletopic.kafka.clients import KafkaClients


def test_other_workers_drop_out_after_missed_heartbeats_and_ours_stays() -> None:
    now = [100.0]
    board = StatusTopic(KafkaClients(["127.0.0.1:1"], {}), "statuses", 1, "a:8083", clock=lambda: now[0])
    board.publish("c", TaskStatus("a:8083", "RUNNING", None, ("t",)))
    record = {"connector": "c", "worker_id": "b:8083", "state": "FAILED", "trace": "boom", "topics": []}
    board._apply(b"status-task-c-b:8083", json.dumps(record).encode(), 0)
    assert [t.worker_id for t in board.tasks("c")] == ["a:8083", "b:8083"]
    assert board.tasks("c")[1] == TaskStatus("b:8083", "FAILED", "boom", ())
    now[0] += _STALE_AFTER_S + 1
    assert [t.worker_id for t in board.tasks("c")] == ["a:8083"]
    board._apply(b"status-task-c-b:8083", json.dumps(record).encode(), 1)  # a heartbeat brings it back
    assert len(board.tasks("c")) == 2
    board._apply(b"status-task-c-b:8083", None, 2)  # it stopped
    board.publish("c", None)
    assert board.tasks("c") == []
