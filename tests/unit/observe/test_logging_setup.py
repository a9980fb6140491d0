"""The JVM's log4j lines as log records: their level, and the warnings tabletopic causes on purpose."""

from __future__ import annotations

import io
import logging
import os
import time

import pytest

from tabletopic.observe.logging_setup import relay_lines


def test_expected_warnings_and_their_stack_traces_go_to_debug(caplog: pytest.LogCaptureFixture) -> None:
    output = b"\n".join([
        b"26/11/26 16:09:53 WARN Utils: Your hostname, vm resolves to a loopback address: 127.0.0.1",
        b"26/11/26 16:09:54 WARN NativeCodeLoader: Unable to load native-hadoop library for your platform",
        b"\tat org.apache.hadoop.util.NativeCodeLoader.<clinit>(NativeCodeLoader.java:60)",
        b"26/11/26 16:09:55 ERROR TaskSetManager: Task 0 failed",
        b"software.amazon.awssdk.core.exception.SdkClientException: Unable to execute HTTP request",
        b"\tat org.apache.spark.scheduler.Task.run(Task.scala:141)",
        b"Set SPARK_LOCAL_IP if you need to bind to another address",
        b"",
    ])
    with caplog.at_level(logging.DEBUG, logger="jvm-test"):
        relay_lines(io.BytesIO(output), "jvm-test", ("loopback address", "native-hadoop", "SPARK_LOCAL_IP")).join(30)
    records = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert records == [
        (logging.DEBUG, "Your hostname, vm resolves to a loopback address: 127.0.0.1"),
        # A stack trace is one record with the line it follows; an expected warning's goes to DEBUG with it.
        (logging.DEBUG, "Unable to load native-hadoop library for your platform\n"
                        "\tat org.apache.hadoop.util.NativeCodeLoader.<clinit>(NativeCodeLoader.java:60)"),
        (logging.ERROR, "Task 0 failed\nsoftware.amazon.awssdk.core.exception.SdkClientException: Unable to execute "
                        "HTTP request\n\tat org.apache.spark.scheduler.Task.run(Task.scala:141)"),
        (logging.DEBUG, "Set SPARK_LOCAL_IP if you need to bind to another address"),  # expected, not log4j's shape
    ]


def test_a_record_from_the_jvms_pipe_is_logged_once_it_pauses_not_when_the_pipe_closes(
        caplog: pytest.LogCaptureFixture) -> None:
    read_end, write_end = os.pipe()
    with caplog.at_level(logging.DEBUG, logger="jvm-pipe"):
        thread = relay_lines(os.fdopen(read_end, "rb"), "jvm-pipe")
        os.write(write_end, b"26/11/26 16:09:55 ERROR S3FileIO: Failed to read\n\tat a.b.C.d(C.java:1)\n")
        for _ in range(200):  # the pipe stays open: only the pause can end the record
            if caplog.records:
                break
            time.sleep(0.05)
        assert [r.getMessage() for r in caplog.records] == ["Failed to read\n\tat a.b.C.d(C.java:1)"]
        os.close(write_end)
        thread.join(10)
