"""The Spark runtime's start: what may go on while the JVM starts, and what a failed start leaves."""

import threading
from pathlib import Path
from typing import Any

import pytest

from tabletopic.write.spark_session import SparkRuntime


class _Conf:
    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    def set(self, key: str, value: str) -> None:
        self.values[key] = value

    def unset(self, key: str) -> None:
        self.values.pop(key, None)


class _Session:
    def __init__(self) -> None:
        self.conf = _Conf()


class _HeldStart(SparkRuntime):
    """A runtime whose JVM start lasts until the test lets it end, and fails if told to."""

    def __init__(self, failure: Exception | None = None) -> None:
        super().__init__()
        self.starting, self.release = threading.Event(), threading.Event()
        self.failure = failure
        self.starts = 0

    def _start(self) -> Any:
        self.starts += 1
        self.starting.set()
        self.release.wait()
        if self.failure is not None:
            raise self.failure
        return _Session()


def _start_in_a_thread(runtime: _HeldStart) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(runtime.session)
        except Exception as exc:
            out.append(exc)
    thread = threading.Thread(target=run)
    thread.start()
    runtime.starting.wait()
    return thread, out


def test_catalogs_and_jars_are_asked_for_while_the_jvm_starts_without_waiting_for_it() -> None:
    """A daemon's connectors are built while the JVM starts: registering a catalog and asking for jars
    return while the start is still held (with one lock for all, they would wait for it)."""
    runtime = _HeldStart()
    thread, out = _start_in_a_thread(runtime)
    runtime.register_catalog("lake", {"type": "hadoop", "warehouse": "/w"})
    lacking = runtime.require(True, [Path("/drivers/postgresql.jar")])
    assert not runtime.release.is_set() and not runtime.started
    assert lacking == "the S3, REST and Glue jars, /drivers/postgresql.jar"  # the JVM's jars were fixed at its start
    runtime.release.set()
    thread.join()
    session = out[0]
    assert isinstance(session, _Session) and runtime.started
    assert session.conf.values == {"spark.sql.catalog.lake": "org.apache.iceberg.spark.SparkCatalog",
                                   "spark.sql.catalog.lake.type": "hadoop", "spark.sql.catalog.lake.warehouse": "/w"}
    runtime.register_catalog("later", {"type": "rest"})  # once started, a catalog goes into the conf at once
    assert session.conf.values["spark.sql.catalog.later.type"] == "rest"


def test_a_failed_start_is_not_tried_again_by_each_thread_that_waited_for_it() -> None:
    runtime = _HeldStart(failure=RuntimeError("Java gateway process exited before sending its port number"))
    thread, out = _start_in_a_thread(runtime)
    runtime.release.set()
    thread.join()
    assert isinstance(out[0], RuntimeError)
    with pytest.raises(RuntimeError, match="Spark did not start: Java gateway process exited"):
        runtime.session  # noqa: B018 - the property is the start
    assert runtime.starts == 1 and not runtime.started
