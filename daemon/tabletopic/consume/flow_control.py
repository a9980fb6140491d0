"""Whether a connector's agent takes records: paused by its user, drained at stop, held over its memory bound."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

from faust.types import TP

from tabletopic.consume.faust_aiokafka import paused_partitions


class Relief(Protocol):
    """What memory relief asks of the commit protocol (:class:`~tabletopic.commit.member.Member`)."""

    async def relieve(self) -> None: ...


class FlowControl:
    """The agent's gate. Runs on the event loop.

    A pause and a drain stop the agent between fetches: the fetch being taken ends first, so that no
    record is half taken. Memory relief pauses the partitions in the consumer instead, until a commit
    has drained the buffers.
    """

    def __init__(self, app: Any, relief: Relief, buffered_bytes: Callable[[], int], max_bytes: int,
                 waiting_bytes: Callable[[], int], log: Any) -> None:
        self._app = app
        self._relief = relief
        self._buffered_bytes = buffered_bytes  # the sink's rows in Python, buffered or being written
        self._max_bytes = max_bytes  # tabletopic.buffer.max-bytes
        self._waiting_bytes = waiting_bytes  # fetched and not taken yet
        self._log = log
        self.draining = False  # set at stop: what is fetched from here on is left for the next owner
        self._running = asyncio.Event()  # cleared while the connector is paused: fetches wait in the channel
        self._running.set()
        self.taking = asyncio.Lock()  # held while a fetch is being taken
        self._memory_paused: set[TP] = set()  # partitions paused here because the buffers are full

    async def hold(self) -> None:
        """Pause: take no more fetches, once the one being taken is done.

        The member stays in its group (its heartbeats go on), the channel fills and Faust's fetch
        loop waits on it: nothing is read, and nothing fetched is lost.
        """
        self._running.clear()
        async with self.taking:
            pass

    def release(self) -> None:
        """Resume after :meth:`hold`."""
        self._running.set()

    async def wait_running(self) -> None:
        await self._running.wait()

    async def drain(self, wait_s: float) -> None:
        """Take no more records (the final round follows).

        The fetch being taken ends first, for at most ``wait_s``, so that its records are in the final
        round: one may be waiting for its new table to be created. Past that its records are read again
        after a restart, as any not committed.
        """
        self.stop()
        try:
            await asyncio.wait_for(self._taken(), wait_s)
        except asyncio.TimeoutError:
            self._log.warning("the records being ingested did not reach the buffers before the final round; "
                              "they are read again after a restart", waited_s=wait_s)

    def stop(self) -> None:
        self.draining = True
        self._running.set()  # a paused agent wakes up, to skip what is left

    async def _taken(self) -> None:
        async with self.taking:
            pass

    async def relieve(self) -> None:
        """Over tabletopic.buffer.max-bytes: pause the partitions until a commit has drained the buffers.

        A paused partition stays assigned (no rebalance); aiokafka keeps at most one fetch of it, which
        is not drained until it resumes, so nothing fetched is dropped or read twice. Fetches already
        handed over wait in the channel and count toward the bound.
        """
        consumer = self._app.consumer
        self._memory_paused = set(consumer.assignment()) - paused_partitions(self._app)
        consumer.pause_partitions(self._memory_paused)
        self._log.info("buffers over tabletopic.buffer.max-bytes: partitions paused until a commit drains them",
                       buffered_bytes=self._buffered_bytes(), waiting_bytes=self._waiting_bytes())
        try:
            # The first relief writes what is buffered and hands it over (an early commit); more are needed
            # only while an earlier answer, still unsettled, kept it from writing. Fetches waiting in the
            # channel are not waited for: they are taken once the partitions resume.
            await self._relief.relieve()
            while self._buffered_bytes() > self._max_bytes and not self.draining:
                await self._relief.relieve()
        finally:
            consumer.resume_partitions(self._memory_paused & set(consumer.assignment()))
            self._memory_paused = set()
