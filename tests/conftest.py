"""One broker and one SparkSession for the whole test session (starting either takes seconds)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tabletopic.config.catalog_settings import POSTGRES_DRIVER
from tabletopic.demo.broker import EmbeddedBroker
from tabletopic.write.spark_session import SparkRuntime
from tests.support import STARTED, TEST_JVM, Warehouse

pytest_plugins = ["tests.bytecode", "tests.schedule"]  # compiled modules; how many workers, in which order


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

