"""A connector's rebalance hooks: partitions sought where the tables say, and the commit protocol told."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from faust.types import TP

from tabletopic.commit.member import Member
from tabletopic.consume.faust_aiokafka import kafka_consumer
from tabletopic.core.topic_partition import TopicPartition
from tabletopic.task.sink_task import SinkTask


class RebalanceHooks:
    """Connected to the Faust app's assignment and revocation signals. Runs on the event loop.

    On assignment every new partition is sought to the position its tables give, then the member
    learns the generation; on revocation the member may stop coordinating at once, and the sink lets
    the partitions go.
    """

    def __init__(self, app: Any, task: SinkTask, member: Member, fail: Callable[[BaseException], None],
                 log: Any) -> None:
        self._app = app
        self._task = task
        self._member = member
        self._fail = fail
        self._log = log
        # Faust's stub asks for handlers of (sender, *args); it calls them (sender, partitions, signal=...).
        app.on_partitions_assigned.connect(self.on_assigned)
        app.on_partitions_revoked.connect(self.on_revoked)

    async def on_assigned(self, sender: Any, assigned: set[TP], **_: Any) -> None:
        tps = {(tp.topic, tp.partition) for tp in assigned}
        try:
            seeks = await self._task.on_assigned(tps)
        except Exception as exc:
            self._log.exception("cannot read positions from the tables; stopping rather than guessing")
            self._fail(exc)
            return
        for (topic, partition), offset in seeks.items():
            await self._app.seek(TP(topic, partition), offset)
        self._member.on_assignment(tps, self.all_partitions(), int(self._app.consumer_generation_id or 0))
        self._log.info("partitions assigned", partitions=len(tps), seeked=len(seeks))

    async def on_revoked(self, sender: Any, revoked: set[TP], **_: Any) -> None:
        tps = {(tp.topic, tp.partition) for tp in revoked}
        self._log.info("partitions revoked", partitions=len(tps))
        if tps:
            self._member.on_revoked(tps, self.all_partitions())
        await self._task.on_revoked(tps)

    def all_partitions(self) -> set[TopicPartition]:
        """Every partition of the subscribed topics, across all members (the coordinator waits for them)."""
        consumer = kafka_consumer(self._app)
        out: set[TopicPartition] = set()
        for topic in consumer.subscription():
            out |= {(topic, p) for p in consumer.partitions_for_topic(topic) or ()}
        return out

    async def reseek_all(self) -> None:
        """After a fenced commit: positions come from the tables again."""
        seeks = await self._task.seek_positions(set(self._task.assigned))
        for (topic, partition), offset in seeks.items():
            self._app.request_seek(TP(topic, partition), offset)
