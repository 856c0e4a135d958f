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

from engine.store import SqliteStore
from engine.store.sqlite import _trips
from tests.test_store_contract import inbound


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
        store.db.forget_cached()  # as after a prune: nothing is known any more
        assert len(await store.inbox.sent_since("t", "bob", since)) == 1  # read again
        assert _trips._count > before
