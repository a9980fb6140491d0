import subprocess
import sys

from aiokafka.consumer.fetcher import Fetcher
from faust.transport.drivers.aiokafka import Consumer

from tabletopic.consume.faust_aiokafka import library_versions, missing_internals


def test_the_installed_faust_and_aiokafka_have_every_internal_the_consumer_uses() -> None:
    assert missing_internals() == [], library_versions()


def test_a_renamed_method_or_attribute_is_named() -> None:
    used = [(Consumer, "_wait_next_records", True), (Consumer, "_no_such_method", True),
            (Fetcher, "_records", False), (Fetcher, "_no_such_attribute", False)]
    assert missing_internals(used) == ["faust.transport.drivers.aiokafka.Consumer._no_such_method",
                                       "aiokafka.consumer.fetcher.Fetcher._no_such_attribute"]


def test_the_daemon_refuses_to_start_with_exit_78_when_one_is_gone(tmp_path) -> None:
    # A release that renamed a method: the daemon stops before it reads a file or a broker, naming both.
    script = ("import sys; from faust.transport.consumer import Consumer; del Consumer._wait_next_records; "
              "from tabletopic.cli import main; sys.exit(main(['standalone', 'worker.properties']))")
    (tmp_path / "worker.properties").write_text("bootstrap.servers=127.0.0.1:1\n")
    run = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 78, run.stderr[-2000:]
    assert "Consumer._wait_next_records" in run.stderr and "aiokafka" in run.stderr and "faust-streaming" in run.stderr
