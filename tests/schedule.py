"""How many workers run the tests, and in which order they take them: longest first, dealt out evenly.

Unit tests keep a core busy from start to end: one worker per core. End-to-end tests spend part of their
time waiting on commit intervals, restarts and session timeouts, so a run with them gets more workers than
cores, to fill that time. ``-n auto`` (in ``pyproject.toml``) asks this module; ``-n N`` or
``PYTEST_XDIST_AUTO_NUM_WORKERS`` overrides it.

xdist's worksteal hands each worker an equal run of the collection, in file order, and lets an idle worker
take the back half of the longest queue. In file order, one worker can be handed every long maintenance
test back to back and finish minutes after the others. Dealt out longest first, each worker starts on its
share of the long tests, and what the stealing moves at the end is the short ones.

The costs are those of the last run that stored them (``pytest --store-durations`` merges into
``tests/durations.json``, which keeps the tests of half a second or more). A test that file does not know
costs what its kind usually does.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

DURATIONS = Path(__file__).with_name("durations.json")
_UNIT = Path(__file__).with_name("unit")
_UNKNOWN_UNIT_S = 0.05
_UNKNOWN_END_TO_END_S = 20.0
_EXTRA_END_TO_END_WORKERS = 2
# An end-to-end worker holds a broker and a reader's JVM, and its tests start up to three daemons, each
# with a JVM: four workers used about 5 GiB in all here. More workers than memory allows would swap.
_MEMORY_PER_END_TO_END_WORKER = 3 << 30
_KEPT_FROM_S = 0.5  # shorter ones are all alike for the order: the file keeps to the ones that matter


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--store-durations", action="store_true",
                     help=f"merge each test's time in this run into {DURATIONS.name}, which orders later runs")


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # xdist's own hook reads it
    cores = len(os.sched_getaffinity(0))
    paths = [Path(config.invocation_params.dir, arg.split("::")[0]).resolve() for arg in config.args]
    unit_only = bool(paths) and all(path.is_relative_to(_UNIT) for path in paths)
    if unit_only:
        return cores
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return max(1, min(cores + _EXTRA_END_TO_END_WORKERS, memory // _MEMORY_PER_END_TO_END_WORKER))


def dealt(items: list[pytest.Item], costs: dict[str, float], workers: int) -> list[pytest.Item]:
    """``items`` in ``workers`` runs, one after the other, as worksteal cuts the collection (the ``k``-th
    run, of the length it gives, goes to worker ``k``): each next longest test goes to the run with the
    least time so far that has room, and each run is longest first."""
    def cost(item: pytest.Item) -> float:
        known = costs.get(item.nodeid)
        if known is not None:
            return known
        return _UNKNOWN_UNIT_S if item.path.is_relative_to(_UNIT) else _UNKNOWN_END_TO_END_S

    rest, room = len(items), []
    for k in range(workers):  # worksteal hands out pending // idle workers, worker by worker
        room.append(rest // (workers - k))
        rest -= room[-1]
    runs: list[list[pytest.Item]] = [[] for _ in range(workers)]
    load = [0.0] * workers
    for item in sorted(items, key=cost, reverse=True):  # stable: equal costs keep the file order
        k = min((k for k in range(workers) if len(runs[k]) < room[k]), key=load.__getitem__)
        runs[k].append(item)
        load[k] += cost(item)
    return [item for run in runs for item in run]


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    worker = getattr(config, "workerinput", None)  # only xdist's workers collect; each must order alike
    if worker is None or int(worker["workercount"]) < 2:
        return
    costs = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
    items[:] = dealt(items, costs, int(worker["workercount"]))


class _Recorder:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[report.nodeid] = self.seconds.get(report.nodeid, 0.0) + report.duration

    def pytest_sessionfinish(self) -> None:
        stored = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
        stored.update({nodeid: round(s, 1) for nodeid, s in self.seconds.items()})
        kept = {nodeid: s for nodeid, s in sorted(stored.items()) if s >= _KEPT_FROM_S}
        DURATIONS.write_text(json.dumps(kept, indent=0) + "\n")


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--store-durations") and not hasattr(config, "workerinput"):
        config.pluginmanager.register(_Recorder(), "tabletopic-durations")
