"""Everything tabletopic uses of Faust and aiokafka beyond their public API, in one place.

Two things need their internals:

* Handing fetches to the agent a batch at a time.  Faust delivers each record through two tasks and
  builds a ``ConsumerRecord`` and a ``Message`` for it, about 3.5 µs a record measured here, more than
  converting it.  So the consumer's ``_getmany`` and ``_drain_messages`` are replaced, and aiokafka's
  fetched batches are drained as the record objects its decoder already made.
* A few settings and calls with no public form: Faust's delay before it resubscribes, the partitions
  it paused itself, its offset commit, its rebalance sensors, aiokafka's underlying consumer, the
  fetch sizes Faust fixes when it makes that consumer, and a DeleteGroups request.

No other module touches a leading-underscore attribute of either library.  Both are pinned to the
minor versions tested (``setup.cfg``, ``constraints.txt``); :func:`missing_internals` checks at
start-up that each name used here is still there, so that a release that renames one stops the
daemon with exit code 78 and the versions, not at the first fetch.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any, Protocol, cast

import faust
from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.consumer.fetcher import Fetcher, FetchResult, PartitionRecords
from aiokafka.errors import ConsumerStoppedError
from faust.transport.conductor import Conductor
from faust.transport.consumer import Fetcher as FaustFetcher
from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread
from faust.transport.drivers.aiokafka import Consumer as FaustConsumer
from faust.types import TP

# (class, name, method?) for every internal used below.  A method must be an attribute of the class; an
# attribute set on instances must be assigned in the source of the class or one of its bases.
_USED: list[tuple[type, str, bool]] = [
    (FaustConsumer, "_getmany", True),
    (FaustConsumer, "_drain_messages", True),
    (FaustConsumer, "_wait_next_records", True),
    (FaustConsumer, "_commit", True),
    (FaustConsumer, "_thread", False),
    (FaustConsumer, "_stopped", False),
    (FaustConsumer, "_read_offset", False),
    (FaustConsumer, "_paused_partitions", False),
    (FaustConsumer, "_new_consumer_thread", True),
    (FaustFetcher, "_stopped", False),
    (AIOKafkaConsumerThread, "_ensure_consumer", True),
    (AIOKafkaConsumerThread, "_create_worker_consumer", True),
    (AIOKafkaConsumer, "_fetcher", False),
    (AIOKafkaConsumer, "_fetch_min_bytes", False),
    (AIOKafkaConsumer, "_fetch_max_wait_ms", False),
    (AIOKafkaConsumer, "_closed", False),
    (AIOKafkaConsumer, "_max_poll_records", False),
    (Fetcher, "_closed", False),
    (Fetcher, "_subscriptions", False),
    (Fetcher, "_records", False),
    (Fetcher, "_create_fetch_waiter", True),
    (FetchResult, "_partition_records", False),
    (PartitionRecords, "_consumer_record", True),
    (faust.App, "_new_transport", True),
    (faust.App, "_rebalancing_sensor_state", False),
    (Conductor, "_resubscribe_sleep_lock_seconds", False),
    (AIOKafkaAdminClient, "_send_request", True),
]


def _source(klass: type, sources: dict[type, str]) -> str:
    if klass not in sources:
        try:
            sources[klass] = inspect.getsource(klass)
        except (OSError, TypeError):
            sources[klass] = ""
    return sources[klass]


def _assigned_in_source(cls: type, name: str, sources: dict[type, str]) -> bool:
    for klass in cls.__mro__:
        if klass is object:
            continue
        source = _source(klass, sources)
        if f"self.{name} =" in source or f"self.{name}:" in source or f"    {name} =" in source \
                or f"    {name}:" in source:
            return True
    return False


def missing_internals(used: list[tuple[type, str, bool]] | None = None) -> list[str]:
    """Each internal this module needs that the installed Faust or aiokafka no longer has."""
    sources: dict[type, str] = {}  # each class's source, read once: several names share a class
    missing = []
    for cls, name, method in _USED if used is None else used:
        found = callable(getattr(cls, name, None)) if method else _assigned_in_source(cls, name, sources)
        if not found:
            missing.append(f"{cls.__module__}.{cls.__qualname__}.{name}")
    return missing


def library_versions() -> str:
    return f"faust-streaming {version('faust-streaming')}, aiokafka {version('aiokafka')}"


# -- the batch hand-off -------------------------------------------------------------------------------------


def _as_is(_tp: Any, record: Any) -> Any:
    return record


async def fetch_raw(thread: Any, active: set[TP] | None, timeout: float, max_records: int,
                    on_drained: Callable[[float, float], None]) -> dict[TP, list[Any]]:
    """Run in Faust's consumer thread: what aiokafka has fetched, as its decoder's record objects.

    aiokafka's ``fetched_records`` turns each record into a ``ConsumerRecord`` through one method of
    its per-partition iterator; giving each iterator that method as an identity function before
    draining it keeps the decoder's objects instead.  The waiting mirrors ``fetched_records``' own.
    """
    if not thread.consumer.flow_active:
        return {}
    consumer = thread._ensure_consumer()
    fetcher = consumer._fetcher
    if consumer._closed or fetcher._closed:
        raise ConsumerStoppedError()
    deadline = time.monotonic() + timeout
    with fetcher._subscriptions.fetch_context():
        while True:
            for result in list(fetcher._records.values()):
                records = result._partition_records if type(result) is FetchResult else None
                if records is not None and "_consumer_record" not in vars(records):
                    records._consumer_record = _as_is
            wall, cpu = time.perf_counter(), time.thread_time()
            drained: dict[TP, list[Any]] = await fetcher.fetched_records(active, timeout=0, max_records=max_records)
            on_drained(time.perf_counter() - wall, time.thread_time() - cpu)
            remaining = deadline - time.monotonic()
            if drained or remaining <= 0 or fetcher._closed:
                return drained
            waiter = fetcher._create_fetch_waiter()
            done, pending = await asyncio.wait([waiter], timeout=remaining)
            for future in pending:
                future.cancel()
            if waiter in done:
                waiter.result()  # authorization errors


class FetchLoop:
    """What the loop that drains fetches sees of Faust's consumer, in public names."""

    def __init__(self, consumer: FaustConsumer, fetcher: Any) -> None:
        self._consumer = consumer
        self._consumer_stopped = consumer._stopped.is_set
        self._fetcher_stopped = fetcher._stopped.is_set
        self.read_offset: MutableMapping[TP, int | None] = consumer._read_offset  # Faust's own, updated in place

    def stopped(self) -> bool:
        return self._consumer_stopped() or self._fetcher_stopped()

    @property
    def should_stop(self) -> bool:
        return bool(self._consumer.should_stop)

    @property
    def flow_active(self) -> bool:
        return bool(self._consumer.flow_active)

    async def next_records(self, timeout: float) -> Mapping[TP, list[Any]]:
        fetched, _ = await self._consumer._wait_next_records(timeout)
        return fetched or {}


class BatchDrain(Protocol):
    on_drained: Callable[[float, float], None]
    on_fetch_failed: Callable[[BaseException], None]

    def drain_fetches(self, loop: FetchLoop) -> Awaitable[None]: ...


@dataclass(frozen=True)
class FetchSizes:
    """What each fetch asks the broker for: ``fetch.min.bytes``, ``fetch.max.wait.ms`` and ``isolation.level``."""

    min_bytes: int = 1
    max_wait_ms: int = 500
    isolation_level: str = "read_uncommitted"


class SizedFetchThread(AIOKafkaConsumerThread):
    """Faust's consumer thread, whose aiokafka consumer fetches with the app's :class:`FetchSizes`.

    Faust makes the consumer with ``fetch.max.wait.ms`` 1500, aiokafka's ``fetch.min.bytes`` of 1 and
    ``read_uncommitted``, and takes none of them from its settings. They are set before the consumer
    starts, which is when aiokafka hands them to its fetcher.
    """

    def _create_worker_consumer(self, transport: Any) -> AIOKafkaConsumer:
        consumer = super()._create_worker_consumer(transport)
        sizes = cast("RawFetchApp", self.app).fetch_sizes  # only a RawFetchApp's consumer makes this thread
        consumer._fetch_min_bytes = sizes.min_bytes
        consumer._fetch_max_wait_ms = sizes.max_wait_ms
        consumer._isolation_level = sizes.isolation_level  # Faust's is read_uncommitted outside transactions
        return consumer


class RawFetchConsumer(FaustConsumer):
    """Faust's aiokafka consumer, whose fetches the app drains itself (``drain_fetches``)."""

    def _new_consumer_thread(self) -> AIOKafkaConsumerThread:
        return SizedFetchThread(self, loop=self.loop, beacon=self.beacon)

    async def _getmany(self, active_partitions: set[TP] | None, timeout: float) -> Any:
        thread = self._thread
        app: BatchDrain = self.app  # type: ignore[assignment]  # Faust types it AppT; ours is a BatchingApp
        return await thread.call_thread(fetch_raw, thread, active_partitions, timeout,
                                        thread._ensure_consumer()._max_poll_records, app.on_drained)

    async def _drain_messages(self, fetcher: Any) -> None:  # pragma: no cover - exercised end to end
        app: BatchDrain = self.app  # type: ignore[assignment]  # Faust types it AppT; ours is a BatchingApp
        try:
            await app.drain_fetches(FetchLoop(self, fetcher))
        except self.consumer_stopped_errors as exc:
            if self.transport.app.should_stop:
                return
            app.on_fetch_failed(exc)
            raise
        except asyncio.CancelledError:
            if self.transport.app.should_stop:
                return
            raise
        except Exception as exc:
            # Faust would mark its fetcher crashed and go on without it: no more fetches, no more
            # rebalances, a member left in its old generation. The app is told, and fails the connector.
            app.on_fetch_failed(exc)
            raise


class RawFetchApp(faust.App):
    """A Faust app whose consumer is :class:`RawFetchConsumer`."""

    fetch_sizes = FetchSizes()  # what its consumer fetches with; set before the app starts

    def _new_transport(self) -> Any:
        transport: Any = super()._new_transport()
        transport.Consumer = RawFetchConsumer
        return transport

    def on_rebalance_return(self) -> None:
        # Faust starts a rebalance's sensors when aiokafka announces a revocation, and aiokafka
        # announces none before a member's first assignment: so every first join logged a warning
        # ("Missing sensor state for rebalance #1") about nothing wrong.
        if not self._rebalancing_sensor_state:
            self._rebalancing_sensor_state = self.sensors.on_rebalance_start(self)
        super().on_rebalance_return()


# -- settings and calls with no public form --------------------------------------------------------------


def set_resubscribe_delay(app: faust.App, seconds: float) -> None:
    """Faust waits 45 s after a subscription change before it resubscribes, to gather the changes made
    during one rebalance."""
    app.topics._resubscribe_sleep_lock_seconds = seconds  # type: ignore[attr-defined]  # Faust's internals, checked at start-up (check_internals)


def paused_partitions(app: faust.App) -> set[TP]:
    """The partitions Faust paused itself (flow control), which tabletopic must not resume."""
    return set(app.consumer._paused_partitions)  # type: ignore[attr-defined]  # Faust's internals, checked at start-up (check_internals)


def kafka_consumer(app: faust.App) -> AIOKafkaConsumer:
    """aiokafka's consumer under Faust's, for its subscription and partition metadata."""
    return app.consumer._thread._ensure_consumer()  # type: ignore[attr-defined]  # as above: checked at start-up


async def commit_offsets(app: faust.App, offsets: dict[TP, int]) -> None:
    """Commit ``offsets`` to the group as they are: Faust's public commit takes its own acked offsets."""
    await app.consumer._commit(offsets)  # type: ignore[attr-defined]  # Faust's internals, checked at start-up (check_internals)


async def admin_request(admin: AIOKafkaAdminClient, request: Any, node: int) -> Any:
    """A request aiokafka's admin client has no method for (DeleteGroups)."""
    return await admin._send_request(request, node)
