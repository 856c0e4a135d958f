"""Writes of many chats at once on SQLite: committed together, each caller told its own outcome.

A Telegram batch of a hundred updates is a hundred inbox writes at once; they used to go to the
database thread one behind the other. Real SQLite file; the trips counted by the store's own
counter (RELAYBOT_STORE_TRIPS, as benchmarks/bench_telegram.py reads it).
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

import pytest

from engine.store import ConfirmationState, SqliteStore
from engine.store.sqlite import _trips
from tests.test_store_contract import confirmation, inbound


async def test_a_hundred_messages_at_once_are_kept_in_a_few_trips(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(_trips.ENV, str(tmp_path / "trips"))
    path = tmp_path / "relaybot.db"
    async with SqliteStore(path) as store:
        before = _trips._count
        kept = await asyncio.gather(
            *(store.inbox.accept(inbound(f"hello {i}", "m1", chat_id=f"c{i}")) for i in range(100)),
            store.inbox.accept(inbound("hello 7", "m1", chat_id="c7")),  # Telegram sent it twice
        )
        trips = _trips._count - before
    assert kept.count(True) == 100 and kept[-1] is False  # the second copy refused, alone
    assert trips <= 10, f"{trips} trips for 101 writes"
    with sqlite3.connect(path) as other:  # committed: another connection reads them
        assert other.execute("SELECT count(*) FROM inbox").fetchone()[0] == 100


async def test_a_write_that_fails_fails_alone_and_the_others_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "relaybot.db"
    async with SqliteStore(path) as store:
        outcomes = await asyncio.gather(
            *(store.inbox.accept(inbound(f"hi {i}", f"m{i}")) for i in range(5)),
            store.db.execute("INSERT INTO inbox(channel) VALUES ('t')"),  # NOT NULL columns
            *(store.inbox.accept(inbound(f"hi {i}", f"m{i}")) for i in range(5, 10)),
            return_exceptions=True,
        )
    assert isinstance(outcomes[5], sqlite3.IntegrityError)
    assert outcomes[:5] + outcomes[6:] == [True] * 10
    with sqlite3.connect(path) as other:
        texts = [r[0] for r in other.execute("SELECT text FROM inbox ORDER BY id")]
    assert texts == [f"hi {i}" for i in range(10)]  # in the order they were written


async def test_the_rate_window_of_a_user_never_seen_costs_no_trip_after_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A thousand new users at once: none of them asks the store when they last wrote. One who
    wrote before the restart is counted from what the store holds."""
    path = tmp_path / "relaybot.db"
    async with SqliteStore(path) as store:
        assert await store.inbox.accept(inbound("before", "m1", user_id="ann"))
    monkeypatch.setenv(_trips.ENV, str(tmp_path / "trips"))
    async with SqliteStore(path) as store:
        since = time.time() - 60
        before = _trips._count
        assert await store.inbox.sent_since("t", "bob", since) == []
        assert len(await store.inbox.sent_since("t", "ann", since)) == 1
        assert _trips._count == before  # both from what was read at open
        assert await store.inbox.accept(inbound("hi", "m2", user_id="bob"))
        assert len(await store.inbox.sent_since("t", "bob", since)) == 1
        store.caches.drop()  # as after a prune: nothing is known any more
        assert len(await store.inbox.sent_since("t", "bob", since)) == 1  # read again
        assert _trips._count > before


async def test_a_new_chats_first_turn_reads_nothing_the_store_is_known_not_to_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Grants, pending confirmations and memory are read at open: a chat or user without any
    costs no trip; one with some is read, and what is written later is read again."""
    path = tmp_path / "relaybot.db"
    pending = ConfirmationState.PENDING
    async with SqliteStore(path) as store:
        await store.grants.grant("t", "old", "delete", "u1", "Ann")
        await store.memory.add("t:ann", "likes tea")
        conv = await store.conversations.active("t", "waiting")
        await store.confirmations.add(confirmation(conv.id, chat_id="waiting"))
    monkeypatch.setenv(_trips.ENV, str(tmp_path / "trips"))
    async with SqliteStore(path) as store:
        before = _trips._count
        assert await store.grants.in_chat("t", "new") == []
        assert await store.memory.items("t:bob") == []
        assert await store.confirmations.in_state(pending, "t", "new") == []
        assert _trips._count == before
        assert [g.tool for g in await store.grants.in_chat("t", "old")] == ["delete"]
        assert [i.text for i in await store.memory.items("t:ann")] == ["likes tea"]
        assert len(await store.confirmations.in_state(pending, "t", "waiting")) == 1
        await store.grants.grant("t", "new", "wipe", "u1", "Ann")
        await store.memory.add("t:bob", "plays chess")
        assert [g.tool for g in await store.grants.in_chat("t", "new")] == ["wipe"]
        assert [i.text for i in await store.memory.items("t:bob")] == ["plays chess"]
