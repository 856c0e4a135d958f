"""What instances sharing a PostgreSQL store keep there (engine/store/_pg_cluster.py), checked
directly against a real server: chat leases, the receiving side, adoption of a dead instance,
and the sweep for work nobody holds. The engine's use of them is tested with real processes
in tests/test_instances.py."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import asyncpg
import pytest

from engine.store.postgres import PgCluster, PgStore
from tests.postgres import PostgresServer
from tests.test_store_contract import inbound
from tools.errors import StoreUnavailable


@pytest.fixture
async def pair(postgres: PostgresServer) -> AsyncIterator[tuple[PgStore, PgStore, str]]:
    url = postgres.new_database()
    a, b = PgStore(url), PgStore(url)
    await a.open()
    await b.open()
    try:
        yield a, b, url.split("/")[3].split("?")[0]
    finally:
        await a.close()
        await b.close()


def cluster(store: PgStore) -> PgCluster:
    assert isinstance(store.cluster, PgCluster)
    return store.cluster


async def test_a_chat_and_a_channel_are_held_by_one_live_instance_at_a_time(
    pair: tuple[PgStore, PgStore, str],
) -> None:
    a, b, _ = pair
    ca, cb = cluster(a), cluster(b)
    await ca.join("a", 5)
    await cb.join("b", 5)
    assert await ca.claim("t", "c1")
    assert not await cb.claim("t", "c1")
    assert await ca.claim("t", "c1")  # its own, again (a release that never arrived)
    assert await cb.holder("t", "c1") == "a"
    await ca.release("t", "c1")
    assert await cb.claim("t", "c1") and await ca.holder("t", "c1") == "b"
    parts = ["telegram", "discord/shard-0", "discord/shard-1"]
    assert await ca.receive(parts[:2]) == dict.fromkeys(parts[:2])
    assert await ca.receive(parts[:2]) == dict.fromkeys(parts[:2])  # its own, again
    assert await cb.receive(parts) == {"discord/shard-1": None}  # only what a does not hold
    await ca.checkpoint("discord/shard-0", "session s0")
    await cb.checkpoint("discord/shard-0", "not b's to keep")
    await ca.stop_receiving("discord/shard-0", "session s0 at 7")
    await ca.stop_receiving("telegram")
    assert await cb.receive(parts) == {  # what a left, to resume from
        "telegram": None,
        "discord/shard-0": "session s0 at 7",
        "discord/shard-1": None,
    }
    assert await ca.receive(parts) == {}


async def test_a_dead_instance_is_adopted_once_with_its_chats_and_jobs(
    pair: tuple[PgStore, PgStore, str], postgres: PostgresServer
) -> None:
    a, b, database = pair
    ca, cb = cluster(a), cluster(b)
    await ca.join("a", 5)
    await cb.join("b", 5)
    assert await ca.claim("t", "c1") and await ca.claim("x", "c2")
    conv = await a.conversations.active("t", "c1")
    await a.jobs.add(conv, "j1", "u1", "remind_me", {}, resumable=True)
    assert await ca.receive(["telegram", "discord"]) == {"telegram": None, "discord": None}
    await ca.checkpoint("discord", "session at 3")
    assert await cb.adopt(["t"]) is None  # a is alive
    postgres.psql("UPDATE instances SET heartbeat_at = 0 WHERE name = 'a'", database)
    taken = await cb.adopt(["t"])
    assert taken is not None and taken.instance == "a"
    assert taken.chats == (("t", "c1"),) and taken.jobs == ("j1",)
    assert await cb.adopt(["t"]) is None  # once
    assert await cb.holder("t", "c1") == "b"
    assert await cb.holder("x", "c2") is None  # b has no channel x: let go
    # the dead one's receiving side is free, with what it last kept to resume from
    assert await cb.receive(["telegram", "discord"]) == {
        "telegram": None,
        "discord": "session at 3",
    }
    assert not await ca.heartbeat(5)  # a learns it was taken over


async def test_the_sweep_claims_work_nobody_holds_but_not_messages_held_back(
    pair: tuple[PgStore, PgStore, str],
) -> None:
    a, b, _ = pair
    ca, cb = cluster(a), cluster(b)
    await ca.join("a", 5)
    await cb.join("b", 5)
    await a.inbox.accept(inbound("hi", "m1", chat_id="free"))
    await a.inbox.accept(inbound("hi", "m2", chat_id="held"))
    await a.inbox.accept(inbound("later", "m3", chat_id="later"), hold_until=time.time() + 60)
    await a.inbox.accept(inbound("hi", "m4", chat_id="on its way"))
    assert await ca.claim("t", "held")
    seen = await cb.unheld(["t"])
    assert seen == {("t", "free"), ("t", "on its way")}
    assert await ca.claim("t", "on its way")  # its home claimed it meanwhile
    swept = await cb.orphans(seen & await cb.unheld(["t"]))  # nobody held it at both sweeps
    assert swept.chats == (("t", "free"),)
    assert await cb.unheld(["t"]) == set()
    assert (await cb.orphans(seen)).chats == ()  # claimed now


async def test_a_claim_of_an_instance_taken_over_lands_nothing(
    pair: tuple[PgStore, PgStore, str], postgres: PostgresServer
) -> None:
    a, b, database = pair
    ca, cb = cluster(a), cluster(b)
    await ca.join("a", 5)
    await cb.join("b", 5)
    postgres.psql("UPDATE instances SET heartbeat_at = 0 WHERE name = 'a'", database)
    taken = await cb.adopt(["t"])
    assert taken is not None and taken.instance == "a"
    assert not await ca.claim("t", "c1")  # a does not know yet: its claim must not land
    await a.inbox.accept(inbound("hi", "m1", chat_id="c2"))
    assert (await ca.orphans([("t", "c2")])).chats == ()  # nor its sweep's
    assert await cb.claim("t", "c1") and await cb.holder("t", "c1") == "b"


async def test_a_claim_racing_the_adoption_of_its_instance_lands_nothing(
    pair: tuple[PgStore, PgStore, str], postgres: PostgresServer
) -> None:
    a, b, _ = pair
    ca, cb = cluster(a), cluster(b)
    me = await ca.join("a", 5)
    await cb.join("b", 5)
    adopter = await asyncpg.connect(a.db.url)  # an adoption of a, stopped half-way
    try:
        tx = adopter.transaction()
        await tx.start()
        await adopter.execute("SELECT id FROM instances WHERE id = $1 FOR UPDATE", me)
        claim = asyncio.create_task(ca.claim("t", "c1"))  # a still thinks it is alive
        await adopter.execute("DELETE FROM chat_leases WHERE instance = $1", me)
        await adopter.execute("DELETE FROM instances WHERE id = $1", me)
        await tx.commit()
        assert not await claim
    finally:
        await adopter.close()
    assert await cb.claim("t", "c1") and await cb.holder("t", "c1") == "b"


async def test_a_lease_naming_an_instance_that_is_gone_is_taken_by_the_sweep_and_a_claim(
    pair: tuple[PgStore, PgStore, str], postgres: PostgresServer
) -> None:
    a, b, database = pair
    ca, cb = cluster(a), cluster(b)
    await ca.join("a", 5)
    await cb.join("b", 5)
    await a.inbox.accept(inbound("hi", "m1", chat_id="stranded"))
    postgres.psql(  # what an earlier relaybot's late claim left: nobody could take it
        "INSERT INTO chat_leases(channel, chat_id, instance, since) VALUES "
        "('t', 'stranded', 424242, 0), ('t', 'idle', 424242, 0)",
        database,
    )
    seen = await cb.unheld(["t"])
    assert seen == {("t", "stranded")}
    assert (await cb.orphans(seen & await cb.unheld(["t"]))).chats == (("t", "stranded"),)
    assert await ca.holder("t", "stranded") == "b"
    assert await ca.claim("t", "idle") and await cb.holder("t", "idle") == "a"


async def test_a_heartbeat_held_up_is_not_cancelled_midway_its_connection_is_replaced(
    pair: tuple[PgStore, PgStore, str],
) -> None:
    a, b, _ = pair
    ca, cb = cluster(a), cluster(b)
    me = await ca.join("a", 5)
    await cb.join("b", 5)
    heard: asyncio.Queue[str] = asyncio.Queue()
    ca.on_signal(heard.put_nowait)
    reconnected = asyncio.Event()

    async def came_back() -> None:
        reconnected.set()

    ca.on_reconnect(came_back)
    await ca.listen()
    locker = await asyncpg.connect(a.db.url)
    try:
        tx = locker.transaction()
        await tx.start()
        await locker.execute("SELECT 1 FROM instances WHERE id = $1 FOR UPDATE", me)
        with pytest.raises(StoreUnavailable, match=r"did not answer within 0\.3 s"):
            await ca.heartbeat(0.3)  # held up by the lock
        await asyncio.wait_for(reconnected.wait(), 10)  # dropped, and a new one made
        await tx.rollback()
    finally:
        await locker.close()
    assert await ca.heartbeat(5)  # the next one is not refused as busy
    await cb.publish("still listening")
    assert await asyncio.wait_for(heard.get(), 10) == "still listening"
