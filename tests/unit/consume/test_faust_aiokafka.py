import asyncio
import contextlib
import subprocess
import sys
from types import SimpleNamespace

from aiokafka.consumer.fetcher import Fetcher
from aiokafka.errors import ConsumerStoppedError
from faust.transport.drivers.aiokafka import Consumer

from tabletopic.consume.batch_fetch import BatchingApp
from tabletopic.consume.faust_aiokafka import FetchSizes, RawFetchConsumer, library_versions, missing_internals


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


def test_the_sinks_consumer_is_made_with_the_apps_fetch_sizes(tmp_path) -> None:
    # Faust makes aiokafka's consumer with fetch.max.wait.ms 1500 and fetch.min.bytes 1, whatever it is told.
    async def made() -> tuple[int, int]:
        app = BatchingApp("sized", broker="kafka://127.0.0.1:1", store="memory://", datadir=str(tmp_path),
                          autodiscover=False, web_enabled=False)
        app.fetch_sizes = FetchSizes(min_bytes=1 << 20, max_wait_ms=250)
        consumer = app.consumer._thread._create_worker_consumer(app.transport)
        return consumer._fetch_min_bytes, consumer._fetch_max_wait_ms

    assert asyncio.run(made()) == (1 << 20, 250)


class _App:
    def __init__(self, error: BaseException) -> None:
        self.error, self.failures = error, []

    async def drain_fetches(self, loop: object) -> None:
        raise self.error

    def on_fetch_failed(self, exc: BaseException) -> None:
        self.failures.append(exc)


def _drain(error: BaseException, stopping: bool = False) -> list[BaseException]:
    """The fetch loop of RawFetchConsumer, on a stand-in for Faust's consumer whose drain raises ``error``."""
    app = _App(error)
    consumer = SimpleNamespace(app=app, consumer_stopped_errors=(ConsumerStoppedError,),
                               transport=SimpleNamespace(app=SimpleNamespace(should_stop=stopping)),
                               _stopped=SimpleNamespace(is_set=lambda: False), _read_offset={},
                               should_stop=stopping, flow_active=True)
    fetcher = SimpleNamespace(_stopped=SimpleNamespace(is_set=lambda: False))
    with contextlib.suppress(type(error)):
        asyncio.run(RawFetchConsumer._drain_messages(consumer, fetcher))  # type: ignore[arg-type]
    return app.failures


def test_a_fetch_loop_that_raises_is_reported_so_the_connector_fails() -> None:
    """aiokafka raised KeyError from its drain once (a seek from another thread): Faust marks its fetcher
    crashed and goes on without it. The app hears of it, and the connector fails instead of idling."""
    error = KeyError("t-7")
    assert _drain(error) == [error]
    stopped = ConsumerStoppedError()
    assert _drain(stopped) == [stopped]


def test_a_consumer_stopped_on_shutdown_is_no_failure() -> None:
    assert _drain(ConsumerStoppedError(), stopping=True) == []
