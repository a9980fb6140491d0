"""The JVM's log4j lines as log records: their level, and the warnings tabletopic causes on purpose."""

from __future__ import annotations

import io
import logging

import pytest

from tabletopic.observe.logging_setup import relay_lines


def test_expected_warnings_and_their_stack_traces_go_to_debug(caplog: pytest.LogCaptureFixture) -> None:
    output = b"\n".join([
        b"26/11/26 16:09:53 WARN Utils: Your hostname, vm resolves to a loopback address: 127.0.0.1",
        b"26/11/26 16:09:54 WARN NativeCodeLoader: Unable to load native-hadoop library for your platform",
        b"\tat org.apache.hadoop.util.NativeCodeLoader.<clinit>(NativeCodeLoader.java:60)",
        b"26/11/26 16:09:55 ERROR TaskSetManager: Task 0 failed",
        b"\tat org.apache.spark.scheduler.Task.run(Task.scala:141)",
        b"Set SPARK_LOCAL_IP if you need to bind to another address",
        b"",
    ])
    with caplog.at_level(logging.DEBUG, logger="jvm-test"):
        relay_lines(io.BytesIO(output), "jvm-test", ("loopback address", "native-hadoop", "SPARK_LOCAL_IP")).join(30)
    levels = [(r.levelno, r.getMessage()[:24]) for r in caplog.records]
    assert levels == [
        (logging.DEBUG, "Your hostname, vm resolv"),
        (logging.DEBUG, "Unable to load native-ha"),
        (logging.DEBUG, "\tat org.apache.hadoop.ut"),  # an expected warning's trace goes with it
        (logging.ERROR, "Task 0 failed"),
        (logging.ERROR, "\tat org.apache.spark.sch"),
        (logging.DEBUG, "Set SPARK_LOCAL_IP if yo"),  # expected, though not in log4j's shape
    ]
