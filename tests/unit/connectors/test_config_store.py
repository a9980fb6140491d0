"""Standalone mode's store: changes reach the herder in the order they were made."""

from __future__ import annotations

import asyncio

from tabletopic.connectors.config_store import MemoryConfigStore, RestartRequest, TargetState, TopicsReset


def test_changes_are_told_in_order_and_a_put_keeps_the_target_state() -> None:
    async def go() -> None:
        store = MemoryConfigStore({"a": {"name": "a"}})
        seen: list[object] = []
        store.subscribe(seen.append)
        await store.set_target("a", TargetState.PAUSED)
        await store.put("a", {"name": "a", "topics": "t"})
        assert store.connectors()["a"].target is TargetState.PAUSED  # a reconfiguration keeps it paused
        await store.put("b", {"name": "b"}, TargetState.STOPPED)
        await store.restart(RestartRequest("a", include_tasks=True))
        await store.reset_topics("a")
        await store.set_target("a", TargetState.PAUSED)  # no change: nothing told
        await store.delete("b")
        await store.delete("b")  # gone already: nothing told
        assert seen == ["a", "a", "b", RestartRequest("a", True), TopicsReset("a"), "b"]
        assert list(store.connectors()) == ["a"]
    asyncio.run(go())
