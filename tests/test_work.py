"""The per-chat work: a chat's items run in order, one at a time, whatever fails on the way."""

from __future__ import annotations

import asyncio
import logging

import pytest

from engine.loop._types import ConversationKey
from engine.work._locks import KeyedLocks
from engine.work._queue import ChatQueues, Inbound, Notice, WorkItem

pytestmark = pytest.mark.asyncio

KEY = ConversationKey("telegram", "42")


async def test_a_failing_stop_handler_does_not_strand_the_chats_next_items(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ran: list[WorkItem] = []
    first_runs = asyncio.Event()

    async def handle(key: ConversationKey, item: WorkItem) -> None:
        ran.append(item)
        if len(ran) == 1:
            first_runs.set()
            await asyncio.Event().wait()  # runs until /stop cancels it

    async def on_stopped(key: ConversationKey, item: WorkItem) -> None:
        raise RuntimeError("the store is away")

    queues = ChatQueues()
    queues.open(handle, on_stopped)
    queues.put(KEY, Inbound())
    queues.put(KEY, Notice("still here", None))
    await first_runs.wait()
    with caplog.at_level(logging.ERROR):
        assert queues.stop(KEY)
        await asyncio.wait_for(queues.wait_idle(KEY), 5)
    assert ran == [Inbound(), Notice("still here", None)]  # the next item ran after the failure
    assert "the store is away" in caplog.text
    assert not queues.holding(KEY)


async def test_a_chat_lock_admits_one_holder_however_many_chats_come_and_go() -> None:
    locks: KeyedLocks[object] = KeyedLocks()
    inside: list[str] = []
    overlaps: list[tuple[str, str]] = []
    release_a = asyncio.Event()
    a_in = asyncio.Event()
    later: list[asyncio.Task[None]] = []

    async def critical(name: str, wait: asyncio.Event | None = None) -> None:
        async with locks.hold(KEY):
            overlaps.extend((other, name) for other in inside)
            inside.append(name)
            a_in.set()
            if wait is not None:
                await wait.wait()
            await asyncio.sleep(0)  # let anything that wrongly got in run beside us
            inside.remove(name)
        if name == "a":
            # the waiter (b) is woken but has not run yet: many other chats take and drop
            # their locks now, then another task asks for this chat's lock
            for other in range(10_001):
                async with locks.hold(other):
                    pass
            later.append(asyncio.create_task(critical("c")))

    a = asyncio.create_task(critical("a", release_a))
    await a_in.wait()
    b = asyncio.create_task(critical("b"))
    await asyncio.sleep(0)  # b now waits for a
    release_a.set()
    await asyncio.gather(a, b)
    await asyncio.gather(*later)
    assert overlaps == []
    assert len(locks) == 0  # nothing kept for chats nobody is working on
