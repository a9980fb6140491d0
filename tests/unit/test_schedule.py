"""The test run's order (tests/schedule.py) against xdist's own worksteal scheduler: the run it means for
worker ``k`` is the run worker ``k`` is handed."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from xdist.scheduler.worksteal import WorkStealingScheduling

from tests.schedule import dealt

ROOT = Path(__file__).parents[2]


class _Node:
    shutting_down = False

    def __init__(self, k: int) -> None:
        self.gateway = SimpleNamespace(id=f"gw{k}")
        self.sent: list[int] = []

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent.extend(indices)


def _items(costs: dict[str, float]) -> list[Any]:
    return [SimpleNamespace(nodeid=nodeid, path=ROOT / nodeid.split("::")[0]) for nodeid in costs]


@pytest.mark.parametrize("workers", [2, 3, 4])
def test_each_worker_is_handed_the_run_meant_for_it_and_the_runs_take_alike(workers: int) -> None:
    # Fourteen end-to-end tests of 5 to 200 s and a thousand unit tests, in file order.
    costs = {f"tests/test_e2e.py::t{i}": float(5 + (i * 37) % 196) for i in range(14)}
    costs |= {f"tests/unit/test_u.py::u{i}": 0.01 * (i % 7) for i in range(1000)}
    order = dealt(_items(costs), costs, workers)
    ids = [item.nodeid for item in order]
    assert sorted(ids) == sorted(costs)

    config = SimpleNamespace(getvalue=lambda name: [f"{workers}*popen"])
    scheduler = WorkStealingScheduling(config)  # type: ignore[arg-type]
    nodes = [_Node(k) for k in range(workers)]
    for node in nodes:
        scheduler.add_node(node)  # type: ignore[arg-type]
        scheduler.add_node_collection(node, ids)  # type: ignore[arg-type]
    scheduler.schedule()

    runs = [[ids[i] for i in node.sent] for node in nodes]
    assert [len(run) for run in runs] == [len(ids) // workers + (k >= workers - len(ids) % workers)
                                         for k in range(workers)]
    loads = [sum(costs[nodeid] for nodeid in run) for run in runs]
    longest = max(costs.values())
    assert max(loads) - min(loads) <= longest / 2, loads  # in file order one run holds all fourteen
    for run in runs:  # each starts on its longest, so what a steal takes from its end is short
        assert [costs[nodeid] for nodeid in run] == sorted((costs[nodeid] for nodeid in run), reverse=True)


def test_a_test_the_file_does_not_know_costs_what_its_kind_usually_does() -> None:
    costs = {"tests/test_e2e.py::known": 30.0, "tests/unit/test_u.py::known": 2.0}
    items = _items({**costs, "tests/test_e2e.py::new": 0.0, "tests/unit/test_u.py::new": 0.0})
    order = [item.nodeid for item in dealt(items, costs, 1)]
    assert order == ["tests/test_e2e.py::known", "tests/test_e2e.py::new", "tests/unit/test_u.py::known",
                     "tests/unit/test_u.py::new"]
