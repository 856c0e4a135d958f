"""Which instance takes a chat nobody holds (its home), and how long it keeps a chat whose work
is done: engine/work/_leases.py with real queues on a real PostgreSQL store. What instances do
with them as processes is tested in tests/test_instances.py."""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Awaitable

from engine.loop import ConversationKey
from engine.work import ChatQueues, Inbound, WorkItem
from engine.work._leases import LINGER_S, ChatLeases
from engine.work._signals import Publisher
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

    publisher = Publisher(cluster(store).publish, unreachable)
    return ChatLeases(cluster(store), queues, publisher, spawn, unreachable)


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

    async def stopped(key: ConversationKey) -> None:
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
