"""The state a connector shows beside its tasks, as tools that read both expect it."""

from __future__ import annotations

from tabletopic.connectors.config_store import TargetState
from tabletopic.connectors.requests import state_of_tasks


def test_a_connector_shows_what_its_tasks_agree_on() -> None:
    running, paused = TargetState.RUNNING, TargetState.PAUSED
    # Starting: its task is not running yet, so neither is it.
    assert state_of_tasks(running, ["UNASSIGNED"])[0] == "UNASSIGNED"
    assert state_of_tasks(running, []) == ("UNASSIGNED", "no worker runs its task yet")
    assert state_of_tasks(running, ["RUNNING", "RUNNING"]) == ("RUNNING", None)
    # A pause shows once the task takes no more records, and a resume once it takes them again.
    assert state_of_tasks(paused, ["RUNNING"])[0] == "RUNNING"
    assert state_of_tasks(paused, ["PAUSED"])[0] == "PAUSED"
    assert state_of_tasks(running, ["PAUSED"])[0] == "PAUSED"
    # Workers disagreeing mid-change: the target. Failed tasks leave the connector RUNNING, as in Connect.
    assert state_of_tasks(paused, ["PAUSED", "RUNNING"])[0] == "PAUSED"
    assert state_of_tasks(running, ["FAILED"])[0] == "RUNNING"
    assert state_of_tasks(running, ["FAILED", "RUNNING"])[0] == "RUNNING"
