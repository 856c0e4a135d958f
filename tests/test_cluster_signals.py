"""engine/work's cluster parts against a real PostgreSQL server: the signals instances send each
other (the real :class:`Publisher`, heard by another instance), and the chat leases of an
instance that is fenced while a claim is on its way."""

from __future__ import annotations

import asyncio
import logging

import pytest

from engine.loop import ConversationKey
from engine.store.postgres import PgStore
from engine.work._items import Inbound, Notice
from engine.work._leases import ChatLeases
from engine.work._queue import ChatQueues
from engine.work._signals import Publisher, encode
from tests.test_pg_cluster import cluster, pair

__all__ = ["pair"]  # the fixture, shared with test_pg_cluster

KEY = ConversationKey("t", "c1")


async def test_a_signal_the_server_refuses_is_logged_and_the_next_ones_still_go_out(
    pair: tuple[PgStore, PgStore, str], caplog: pytest.LogCaptureFixture
) -> None:
    a, b, _ = pair
    ca, cb = cluster(a), cluster(b)
    await ca.join("a", 5)
    await cb.join("b", 5)
    heard: asyncio.Queue[str] = asyncio.Queue()
    cb.on_signal(heard.put_nowait)
    await cb.listen()
    came_back: list[ConversationKey] = []
    publisher = Publisher(ca, lambda exc: None, came_back.append)
    publishing = asyncio.create_task(publisher.run())
    try:

        def put(text: str) -> None:
            payload = encode(KEY, Notice(text), ca.incarnation)
            assert payload is not None
            publisher.put(payload, KEY, None, alone=False)

        with caplog.at_level(logging.ERROR, logger="engine.work._cluster"):
            put("before")
            put("x" * 9000)  # a reminder's text, say: longer than NOTIFY takes (8000 bytes)
            put("after")  # in the same statement as the one refused
            assert "before" in await asyncio.wait_for(heard.get(), 10)
            assert "after" in await asyncio.wait_for(heard.get(), 10)
            assert "publishing a signal to the instances failed" in caplog.text
            assert "payload string too long" in caplog.text
            assert came_back == [KEY]  # the dropped one counts as delivered elsewhere
            put("later")  # publishing goes on
            assert "later" in await asyncio.wait_for(heard.get(), 10)
        assert not publishing.done()
    finally:
        publishing.cancel()
        await asyncio.gather(publishing, return_exceptions=True)


async def test_a_claim_on_its_way_when_the_instance_is_fenced_holds_nothing_here(
    pair: tuple[PgStore, PgStore, str],
) -> None:
    a, _, _ = pair
    ca = cluster(a)
    me = await ca.join("a", 5)
    spawned: list[asyncio.Future[None]] = []
    queues = ChatQueues()
    leases = ChatLeases(
        ca, queues, lambda work, _name: spawned.append(asyncio.ensure_future(work)), print
    )
    leases.live = (me,)
    leases.arrived(KEY, Inbound(), to=me)  # its home claims the chat...
    leases.clear()  # ...and is fenced before the claim is back: another instance recovers it
    await asyncio.gather(*spawned)
    assert not leases.holds(KEY)  # its items are not run here as well
    assert not queues.holding(KEY)
