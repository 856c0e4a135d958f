"""The per-chat work: a chat's items run in order, one at a time, whatever fails on the way."""

from __future__ import annotations

import asyncio
import logging

import pytest

from engine.loop._types import ConversationKey
from engine.work._items import Inbound, Notice, WorkItem
from engine.work._locks import KeyedLocks
from engine.work._queue import ChatQueues

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


async def test_an_abandoned_item_winds_down_before_the_chats_next_items_run() -> None:
    running: list[str] = []
    most = 0
    ran: list[str] = []
    first_runs = asyncio.Event()
    first_cut = asyncio.Event()  # the first item was cancelled and is winding down
    wound_down = asyncio.Event()  # ... let it finish
    second_runs = asyncio.Event()
    second_may_end = asyncio.Event()

    async def handle(key: ConversationKey, item: WorkItem) -> None:
        nonlocal most
        assert isinstance(item, Notice)
        running.append(item.text)
        most = max(most, len(running))
        ran.append(item.text)
        try:
            if item.text == "first":
                first_runs.set()
                try:
                    await asyncio.Event().wait()  # runs until abandoned
                finally:
                    first_cut.set()
                    await wound_down.wait()  # its clean-up takes a while
            elif item.text == "second":
                second_runs.set()
                await second_may_end.wait()
        finally:
            running.remove(item.text)

    async def on_stopped(key: ConversationKey) -> None:
        pass

    queues = ChatQueues()
    queues.open(handle, on_stopped)
    queues.put(KEY, Notice("first", None))
    await first_runs.wait()
    abandoning = asyncio.create_task(queues.abandon())  # this instance was fenced
    await first_cut.wait()
    queues.put(KEY, Notice("second", None))  # the chat's work comes back (joined again)
    for _ in range(5):  # everything runnable runs (no time passes): the second must wait
        await asyncio.sleep(0)
    assert ran == ["first"]
    wound_down.set()
    await abandoning
    await second_runs.wait()
    assert queues.holding(KEY)  # the second runs: what the abandoned worker left is not this
    queues.put(KEY, Notice("third", None))  # queued behind the second, not beside it
    second_may_end.set()
    await queues.wait_idle(KEY)
    assert ran == ["first", "second", "third"]
    assert most == 1  # never two items of the chat at once
    assert not queues.holding(KEY)
