"""One broker and one SparkSession for the whole test session (starting either takes seconds)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tabletopic.config.catalog_settings import POSTGRES_DRIVER
from tabletopic.demo.broker import EmbeddedBroker
from tabletopic.write.spark_session import SparkRuntime
from tests.support import STARTED, TEST_JVM, Warehouse

UNIT = Path(__file__).parent / "unit"


def _expected_length(item: pytest.Item) -> int:
    """A tier from what the test says of itself: its own timeout (the longest scenarios raise it), ``slow``,
    any other end-to-end test, a unit test."""
    if item.path.is_relative_to(UNIT):
        return 0
    marker = item.get_closest_marker("timeout")
    if marker is not None and marker.args and marker.args[0] > 240:
        return int(marker.args[0])
    return 240 if item.get_closest_marker("slow") else 100


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest tests first. The workers take tests from one queue, one at a time (``--dist load
    --maxschedchunk 1``), so the long scenarios start at once on every worker and the short ones fill in
    around them, instead of one worker starting a three-minute test when the others are done. The sort
    is stable: a module's tests stay in their order."""
    items.sort(key=_expected_length, reverse=True)


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    log = tmp_path_factory.mktemp("broker") / "tansu.log"
    with EmbeddedBroker(log_path=log) as running:
        yield running


@pytest.fixture(scope="session")
def bootstrap(broker: EmbeddedBroker) -> str:
    return broker.bootstrap_servers


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkRuntime]:
    # With the S3 and catalog jars, and the PostgreSQL driver where installed: the lake tests read through it.
    drivers = [POSTGRES_DRIVER] if POSTGRES_DRIVER.exists() else []
    runtime = SparkRuntime({"spark.master": "local[2]", "spark.driver.memory": "1g", **TEST_JVM}, lake=True,
                           extra_jars=drivers)
    runtime.session  # noqa: B018 - start it once, up front
    yield runtime
    runtime.stop()


@pytest.fixture(autouse=True)
def stop_leftover_daemons() -> Iterator[None]:
    """A test that fails half-way must not leave its daemons (and their JVMs) running."""
    yield
    while STARTED:
        daemon = STARTED.pop()
        if daemon.alive():
            daemon.kill()


@pytest.fixture
def warehouse(spark: SparkRuntime, tmp_path: Path) -> Warehouse:
    root = tmp_path / "warehouse"
    root.mkdir()
    return Warehouse(spark, root)

