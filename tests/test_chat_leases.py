"""Which instance takes a chat nobody holds (its home), and how long it keeps a chat whose work
is done: engine/work/_leases.py with real queues on a real PostgreSQL store. What instances do
with them as processes is tested in tests/test_instances.py."""

from __future__ import annotations

import asyncio
import collections
import json
import time
from collections.abc import AsyncIterator, Awaitable

import pytest

from engine.loop import ConversationKey
from engine.store.postgres import PgStore
from engine.work import ChatQueues, Inbound, JobDone, WorkItem
from engine.work._leases import LINGER_S, ChatLeases
from tests.postgres import PostgresServer
from tests.test_pg_cluster import cluster, pair  # noqa: F401 (a fixture)

CHATS = [ConversationKey("telegram", str(1000 + n)) for n in range(600)]


Tasks = dict[str, list[asyncio.Task[None]]]  # what the leases started, by name
spawned = asyncio.Event()  # set at each


def leases_of(store, queues: ChatQueues, tasks: Tasks) -> ChatLeases:
    def spawn(work: Awaitable[None], name: str) -> None:
        tasks.setdefault(name, []).append(asyncio.ensure_future(work))
        spawned.set()

    def unreachable(exc: BaseException) -> None:
        raise exc

    return ChatLeases(cluster(store), queues, spawn, unreachable)


async def test_every_instance_names_the_same_home_and_chats_move_only_with_theirs(pair) -> None:  # noqa: F811
    a, b, _ = pair
    tasks: Tasks = {}
    here, there = leases_of(a, ChatQueues(), tasks), leases_of(b, ChatQueues(), tasks)
    here.live = there.live = (3, 5, 9)
    homes = {chat: here.home(chat) for chat in CHATS}
    assert homes == {chat: there.home(chat) for chat in CHATS}  # no instance disagrees
    spread = collections.Counter(homes.values())
    assert set(spread) == {3, 5, 9} and min(spread.values()) > 150, spread  # ~200 each
    here.live = (3, 9)  # 5 stopped
    moved = {chat for chat in CHATS if here.home(chat) != homes[chat]}
    assert moved == {chat for chat, home in homes.items() if home == 5}
    here.live = (3, 5, 9, 12)  # 12 joined: it takes about a quarter, from each
    taken = {chat for chat in CHATS if here.home(chat) != homes[chat]}
    assert all(here.home(chat) == 12 for chat in taken) and 100 < len(taken) < 200


async def test_a_chat_is_kept_a_while_after_its_work_is_done_then_let_go(pair) -> None:  # noqa: F811
    a, _, _ = pair
    await cluster(a).join("a", 30)
    queues, tasks = ChatQueues(), Tasks()
    leases = leases_of(a, queues, tasks)
    leases.live = await cluster(a).live()
    done: asyncio.Queue[WorkItem] = asyncio.Queue()

    async def handle(key: ConversationKey, item: WorkItem) -> None:
        done.put_nowait(item)

    async def stopped(key: ConversationKey, item: WorkItem) -> None:
        return None

    queues.open(handle, stopped)
    chat = CHATS[0]
    leases.arrived(chat, Inbound(), leases.home(chat))  # addressed to this one: it claims
    await done.get()
    await queues.wait_idle(chat)
    finished = time.monotonic()
    assert await cluster(a).holder(chat.channel, chat.chat_id) == "a"
    queues.put(chat, Inbound())  # the next message comes while it is kept: no claim needed
    await done.get()
    await queues.wait_idle(chat)
    finished = time.monotonic()
    async with asyncio.timeout(LINGER_S + 5):
        while not tasks.get("release"):
            await spawned.wait()  # the next task the leases start
            spawned.clear()
    await asyncio.gather(*tasks["release"])
    assert await cluster(a).holder(chat.channel, chat.chat_id) is None
    assert time.monotonic() - finished >= LINGER_S - 0.05  # timers may fire a little early


class Heard(dict[str, list[tuple[str, dict[str, object]]]]):
    """By instance: what it heard, in order, each with how ("all": on the shared channel, "me":
    on its own)."""

    def __init__(self) -> None:
        super().__init__()
        self.news = asyncio.Event()  # set whenever an instance hears something


@pytest.fixture
async def trio(postgres: PostgresServer) -> AsyncIterator[tuple[list[PgStore], Heard]]:
    """Three instances joined and listening on one database; what each hears, and how: "all"
    (the shared channel) or "me" (its own)."""
    url = postgres.new_database()
    stores = [PgStore(url) for _ in range(3)]
    heard = Heard()
    try:
        for name, store in zip("abc", stores, strict=True):
            await store.open()
            mine = heard.setdefault(name, [])

            def hear(payload: str, how: str, mine: list = mine) -> None:  # type: ignore[type-arg]
                mine.append((how, json.loads(payload)))
                heard.news.set()

            cluster(store).on_signal(lambda p, hear=hear: hear(p, "all"))
            cluster(store).on_addressed(lambda p, hear=hear: hear(p, "me"))
            await cluster(store).join(name, 30)
            await cluster(store).listen()
        yield stores, heard
    finally:
        for store in stores:
            await store.close()


def mark(leases: ChatLeases, marker: str) -> None:
    """Publish `marker` to every instance, after what was handed over so far."""
    leases.publisher.put(json.dumps({"k": marker}), CHATS[-1], None, alone=False)


async def heard_by_all(heard: Heard, marker: str) -> None:
    """Wait until every instance heard `marker` (published after what the test checks: one
    sender's notifications arrive in the order they were committed)."""
    async with asyncio.timeout(10):
        while not all(any(s.get("k") == marker for _, s in h) for h in heard.values()):
            heard.news.clear()
            await heard.news.wait()


async def test_a_message_wakes_only_the_instance_holding_its_chat_or_its_home(trio) -> None:
    stores, heard = trio
    a, b, _c = stores
    leases = leases_of(a, ChatQueues(), {})
    leases.live = await cluster(a).live()
    ids = dict(zip("abc", leases.live, strict=True))
    publishing = asyncio.create_task(leases.publisher.run())
    held, free = CHATS[0], next(c for c in CHATS if leases.home(c) == ids["c"])
    assert await cluster(b).claim(held.channel, held.chat_id)
    try:
        leases.hand_over(held, Inbound())  # to b, which holds it
        leases.hand_over(free, Inbound())  # to c, its home: nobody holds it
        mark(leases, "marker-1")
        await heard_by_all(heard, "marker-1")
        told = {
            n: [(how, s["i"], s["h"]) for how, s in h if s["k"] == "inbound"]
            for n, h in heard.items()
        }
        assert told == {"a": [], "b": [("me", held.chat_id, 0)], "c": [("me", free.chat_id, 0)]}
        await leases.publisher.flush(5)
        assert leases.holds(held) is False and not leases._inflight[held]  # nothing to come back

        # b is an older relaybot (no channel of its own): every instance hears, as before
        await a.db.execute("UPDATE instances SET channel = NULL WHERE id = $1", ids["b"])
        leases.hand_over(held, Inbound())
        mark(leases, "marker-2")
        await heard_by_all(heard, "marker-2")
        for name in "abc":
            after = [
                how
                for how, s in heard[name][heard[name].index(("all", {"k": "marker-1"})) :]
                if s["k"] == "inbound"
            ]
            assert after == ["all"], (name, heard[name])
    finally:
        publishing.cancel()


async def test_an_instance_that_lost_the_chat_sends_its_message_on(trio) -> None:
    stores, heard = trio
    a, b, _c = stores
    tasks: Tasks = {}
    leases = leases_of(a, ChatQueues(), tasks)
    leases.live = await cluster(a).live()
    publishing = asyncio.create_task(leases.publisher.run())
    chat = CHATS[1]
    assert await cluster(b).claim(chat.channel, chat.chat_id)  # since it was addressed to a
    try:
        leases.arrived(chat, Inbound(), leases.home(chat), hops=0)  # addressed to a alone
        await asyncio.gather(*tasks["claim"])  # lost: b holds it
        mark(leases, "marker")
        await heard_by_all(heard, "marker")
        sent_on = [
            (n, how, s["h"]) for n, h in heard.items() for how, s in h if s["k"] == "inbound"
        ]
        assert sent_on == [("b", "me", 1)]
        assert await cluster(a).holder(chat.channel, chat.chat_id) == "b"
    finally:
        publishing.cancel()


async def test_signals_handed_over_together_go_out_in_order_and_once(trio) -> None:
    stores, heard = trio
    a, b, _c = stores
    leases = leases_of(a, ChatQueues(), {})
    leases.live = await cluster(a).live()
    held = CHATS[:6]
    for chat in held:
        assert await cluster(b).claim(chat.channel, chat.chat_id)
    for chat in held:  # put before the publisher runs: one batch
        leases.hand_over(chat, Inbound())
    leases.hand_over(held[0], Inbound())  # again: says nothing new, merged
    leases.hand_over(held[1], JobDone("j1"))  # to every instance
    leases.hand_over(held[1], JobDone("j1"))  # the same again: in the next statement
    mark(leases, "marker")
    publishing = asyncio.create_task(leases.publisher.run())
    try:
        await heard_by_all(heard, "marker")
        await leases.publisher.flush(5)
    finally:
        publishing.cancel()
    got = {
        n: [(how, s["k"], s.get("i")) for how, s in h if s["k"] != "joined"]
        for n, h in heard.items()
    }
    to_b = [("me", "inbound", chat.chat_id) for chat in held]
    jobs = [("all", "job", held[1].chat_id)] * 2
    assert got == {
        "a": [*jobs, ("all", "marker", None)],
        "b": [*to_b, *jobs, ("all", "marker", None)],
        "c": [*jobs, ("all", "marker", None)],
    }
    assert not any(leases._inflight[c] for c in [held[0], *held[2:]])  # told b alone: done
