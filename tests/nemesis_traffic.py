"""Live traffic for the nemesis (tests/test_nemesis.py, bench/nemesis.py), and what the tables must then hold.

The producer goes through the same faults as the daemon, so it may fail a send or write a record twice:
what each table must hold is folded from the topic's own log, read back once the network heals.
- an append topic's records carry ``seq``: its table holds every record of the log once;
- a change topic's records carry ``id``, ``v`` and ``op`` (I, U, or D to delete the key): its upsert
  table holds the last value of every key not deleted.
"""

from __future__ import annotations

import asyncio
import collections
import json
import random
import threading
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

PARTITIONS = 4
KEYS = 200


class Traffic:
    """Records produced in a thread until stopped, ``batch`` of each kind every 0.1 s; sends that fail are
    counted and left. ``acked`` is, per partition, the offset after the last record the broker took."""

    def __init__(self, bootstrap: str, append_topic: str, change_topic: str, batch: int = 40,
                 deletes: bool = False) -> None:
        self._bootstrap, self._append, self._changes = bootstrap, append_topic, change_topic
        self._batch, self._deletes = batch, deletes
        self._stop = threading.Event()
        self.failed_sends = 0
        self.acked: dict[tuple[str, int], int] = {}
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), name="traffic")

    def start(self) -> Traffic:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(120)

    async def _run(self) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=self._bootstrap, acks="all", linger_ms=5,
                                    request_timeout_ms=5000, retry_backoff_ms=200)
        while True:
            try:
                await producer.start()
                break
            except Exception:  # the proxy may be refusing at this moment
                await asyncio.sleep(0.5)
        rng, seq = random.Random(7), 0
        try:
            while not self._stop.is_set():
                sends = []
                for _ in range(self._batch):
                    seq += 1
                    key = rng.randrange(KEYS)
                    op = "D" if self._deletes and rng.random() < 0.1 else rng.choice("IU")
                    sends.append(producer.send(self._append, json.dumps({"seq": seq}).encode(),
                                               partition=seq % PARTITIONS))
                    sends.append(producer.send(self._changes, json.dumps({"id": key, "v": seq, "op": op}).encode(),
                                               key=str(key).encode(), partition=key % PARTITIONS))
                for metadata in await asyncio.gather(*[_settled(s) for s in sends]):
                    if metadata is None:
                        self.failed_sends += 1
                        continue
                    tp = (metadata.topic, metadata.partition)
                    self.acked[tp] = max(self.acked.get(tp, 0), metadata.offset + 1)
                await asyncio.sleep(0.1)
        finally:
            await producer.stop()


async def _settled(send: Any) -> Any:
    try:
        return await (await send)
    except Exception:
        return None


def read_log(bootstrap: str, topic: str) -> list[dict[str, Any]]:
    """Every record of ``topic`` in partition order, read to each partition's high watermark."""
    async def go() -> list[dict[str, Any]]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
        await consumer.start()
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        by_partition: dict[int, list[dict[str, Any]]] = collections.defaultdict(list)
        quiet = 0
        try:
            while quiet < 4:
                batch = await consumer.getmany(timeout_ms=500)
                for tp, records in batch.items():
                    by_partition[tp.partition].extend(json.loads(r.value) for r in records)
                done = True
                for tp in tps:
                    high = consumer.highwater(tp)
                    done = done and high is not None and await consumer.position(tp) >= high
                quiet = quiet + 1 if done and not batch else 0
        finally:
            await consumer.stop()
        return [r for p in sorted(by_partition) for r in by_partition[p]]
    return asyncio.run(go())


def fold(changes: list[dict[str, Any]]) -> dict[int, int]:
    """The last value of every key not deleted, as an upsert table with a CDC field must hold it."""
    state: dict[int, int] = {}
    for change in changes:
        if change.get("op") == "D":
            state.pop(change["id"], None)
        else:
            state[change["id"]] = change["v"]
    return state
