"""What a store keeps in memory (SQLite: one process owns it) answers as the store itself does.

Each test reads through the store's parts, writes the ways a turn, a command or housekeeping
writes, and compares with the same read after every cache is dropped (`truth`), on both backends
(PostgreSQL caches nothing, so there it checks the test itself). On SQLite it also checks the
read was answered from memory, and that counters sent "soon" are in the file.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from engine import Message, ToolCall
from engine.store import ConfirmationState, SqliteStore, Store, Summary
from tests.test_store_contract import BACKENDS, confirmation, inbound

LIMIT = 400


@pytest.fixture(params=sorted(BACKENDS))
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    opened = await BACKENDS[request.param](request, tmp_path)
    try:
        yield opened
    finally:
        await opened.__aexit__(None, None, None)


async def truth(store: Store, read: Any) -> Any:
    store.caches.drop()  # type: ignore[attr-defined]
    return await read()


def caches(store: Store) -> bool:
    return bool(store.db.caches)  # type: ignore[attr-defined]


async def test_the_history_in_memory_is_the_history_in_the_store(store: Store) -> None:
    conv = await store.conversations.active("t", "c1")
    after = store.context.messages_after

    async def history() -> list[tuple[int, Message]]:
        return await after(conv.id, 0, LIMIT)

    async def say(text: str, message_id: str) -> None:
        await store.inbox.accept(inbound(text, message_id))
        await store.inbox.take_queued("t", "c1")

    await say("hello", "m1")
    await store.conversations.append(conv.id, Message.assistant(None, [ToolCall("a", "f", "{}")]))
    await store.conversations.append(conv.id, Message.tool_result("a", "42"))
    first = await history()
    await store.conversations.append(conv.id, Message.assistant("hi"), deliver="m1")
    await say("again", "m2")
    if caches(store):
        assert store.context.histories.after(conv.id, 0, LIMIT) is not None  # type: ignore[attr-defined]
    seen = await history()
    assert [m for _, m in seen] == [m for _, m in await truth(store, history)]
    assert [m.text for _, m in seen] == ["hello", None, "42", "hi", "again"]
    assert seen[:3] == first
    # after the summary, a smaller limit, a cut at a user message: the same as the store's
    for after_id, limit in ((seen[1][0], LIMIT), (0, 2), (0, 4), (seen[-1][0], 1)):
        await after(conv.id, 0, LIMIT)  # a tail in memory again
        cached = await after(conv.id, after_id, limit)
        assert cached == await truth(store, lambda a=after_id, n=limit: after(conv.id, a, n))

    await history()
    assert await store.conversations.rewind(conv.id) == 1  # /undo: "again" goes
    assert [m.text for _, m in await history()] == ["hello", None, "42", "hi"]
    await history()
    async with store.transaction():  # a write inside a larger transaction: not taken for known
        await store.conversations.append(conv.id, Message.assistant("inside"))
    assert [m.text for _, m in await history()][-1] == "inside"
    assert await history() == await truth(store, history)


async def test_a_read_racing_writes_keeps_nothing_stale(store: Store) -> None:
    conv = await store.conversations.active("t", "c1")
    await store.inbox.accept(inbound("hello", "m1"))
    await store.inbox.take_queued("t", "c1")

    async def history() -> list[tuple[int, Message]]:
        return await store.context.messages_after(conv.id, 0, LIMIT)

    for n in range(5):  # each read started before, between and after the appends
        first, _, second, _, third = await asyncio.gather(
            history(),
            store.conversations.append(conv.id, Message.assistant(f"a{n}")),
            history(),
            store.conversations.append(conv.id, Message.assistant(f"b{n}")),
            history(),
        )
        if caches(store):  # one connection: a later read is never older
            assert len(first) <= len(second) <= len(third) <= len(first) + 2
        assert await history() == await truth(store, history)
    assert len(await history()) == 11


async def test_a_new_conversation_is_known_empty_and_its_first_message_is_read_from_memory(
    store: Store,
) -> None:
    conv = await store.conversations.active("t", "new")
    await store.inbox.accept(inbound("first", "m1", chat_id="new"))
    await store.inbox.take_queued("t", "new")
    if caches(store):
        known = store.context.histories.after(conv.id, 0, LIMIT)  # type: ignore[attr-defined]
        assert known is not None and [m.text for _, m in known] == ["first"]
    assert [m.text for _, m in await store.context.messages_after(conv.id, 0, LIMIT)] == ["first"]


async def test_the_rate_limit_window_in_memory_counts_what_the_inbox_holds(store: Store) -> None:
    since = time.time() - 60
    assert await store.inbox.sent_since("t", "u1", since) == []
    assert await store.inbox.accept(inbound("one", "m1"))
    assert not await store.inbox.accept(inbound("one", "m1"))  # a redelivery: not counted
    assert await store.inbox.accept(inbound("two", "m2", chat_id="c2"))  # another chat, same user
    assert await store.inbox.accept(inbound("else", "m3", user_id="u2"))
    seen = await store.inbox.sent_since("t", "u1", since)
    assert len(seen) == 2 and seen == sorted(seen)
    assert seen == await truth(store, lambda: store.inbox.sent_since("t", "u1", since))
    later = seen[1]
    assert await store.inbox.sent_since("t", "u1", later) == [later]
    for n in range(5):  # reads started before, between and after the writes
        before, _, after = await asyncio.gather(
            store.inbox.sent_since("t", "u1", since),
            store.inbox.accept(inbound("more", f"r{n}")),
            store.inbox.sent_since("t", "u1", since),
        )
        if caches(store):  # one connection: a later read is never older
            assert len(before) <= len(after) <= len(before) + 1
        seen = await store.inbox.sent_since("t", "u1", since)
        assert seen == await truth(store, lambda: store.inbox.sent_since("t", "u1", since))
        await store.inbox.sent_since("t", "u1", since)  # known again before the next round
    assert len(seen) == 7


async def test_a_chat_known_to_have_no_pending_confirmation_learns_of_a_new_one(
    store: Store,
) -> None:
    conv = await store.conversations.active("t", "c1")
    pending = ConfirmationState.PENDING
    assert await store.confirmations.in_state(pending, "t", "c1") == []
    assert await store.confirmations.in_state(pending, "t", "c1") == []  # from memory
    await store.confirmations.add(confirmation(conv.id))
    rows = await store.confirmations.in_state(pending, "t", "c1")
    assert [r.id for r in rows] == ["abc123"]
    assert await store.confirmations.transition("abc123", pending, ConfirmationState.CANCELLED)
    assert await store.confirmations.in_state(pending, "t", "c1") == []


async def test_memory_read_for_prompts_follows_every_change(store: Store) -> None:
    async def items() -> list[str]:
        return [i.text for i in await store.memory.items("t:ann", None, 200)]

    assert await items() == []
    a = await store.memory.add("t:ann", "likes tea")
    await store.memory.add("t:ann", "lives in Oslo")
    assert await items() == ["lives in Oslo", "likes tea"]
    await asyncio.sleep(0.01)  # used_at must move on: a clock, not a synchronisation
    await store.memory.touch("t:ann", [a])
    assert await items() == ["likes tea", "lives in Oslo"]
    assert [i.text for i in await store.memory.items("t:ann", None, 1)] == ["likes tea"]
    assert await store.memory.delete("t:ann", a)
    assert await items() == ["lives in Oslo"] == await truth(store, items)
    assert await store.memory.clear("t:ann") == 1
    assert await items() == []


async def test_counters_written_soon_are_read_at_once_and_in_the_file_after_closing(
    store: Store, tmp_path: Any
) -> None:
    await store.usage.add("t", "u1", "2026-01-01", 10, 5, 1)
    await store.usage.add("t", "u1", "2026-01-01", 1, 1, 0)
    totals = await store.usage.totals("t", "u1", "2026-01")
    assert (totals.tokens, totals.turns, totals.tool_calls) == (17, 2, 1)
    if not isinstance(store, SqliteStore):
        return
    await store.usage.add("t", "u2", "2026-01-01", 3, 0, 0)  # nothing reads it: sent at close
    await store.close()
    async with SqliteStore(store.path) as again:
        assert (await again.usage.totals("t", "u2", "2026")).tokens == 3
    await store.open()


async def test_a_conversations_summary_read_for_its_turns_follows_each_save(store: Store) -> None:
    conv = await store.conversations.active("t", "c9")
    assert await store.context.summary(conv.id) is None  # a new conversation: none
    await store.context.save_summary(Summary(conv.id, "they spoke of tea", 1, 4))
    assert await store.context.summary(conv.id) == Summary(conv.id, "they spoke of tea", 1, 4)
    await store.context.save_summary(Summary(conv.id, "tea, then coffee", 1, 9))
    read = await store.context.summary(conv.id)
    assert read == await truth(store, lambda: store.context.summary(conv.id))
    assert read is not None and read.text == "tea, then coffee" and read.last_id == 9
