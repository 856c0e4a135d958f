"""Bounded growth on disk: with thousands of messages written one commit at a time, pruning keeps
the database file from growing once the retention is reached, the WAL never passes its limit,
and housekeeping truncates it when the bot is idle (not while it works)."""

from __future__ import annotations

import time
from pathlib import Path

from engine import InboundMessage, Message
from engine.chat import Housekeeping, Retention
from engine.metrics import ErrorLog, use_error_log
from engine.store import SqliteStore, Store
from engine.store.postgres import PgStore
from tests.postgres import PostgresServer

WAL_LIMIT = 1024 * 1024
ROUNDS = 6
PER_ROUND = 400
CHATS = 50


async def one_exchange(store: Store, n: int) -> None:
    """A message as the daemon handles it: accepted, taken, answered, delivered."""
    chat = f"c{n % CHATS}"
    msg = InboundMessage("t", chat, f"u{n % CHATS}", "Ann", f"question {n} " + "x" * 300, f"m{n}")
    await store.inbox.accept(msg)
    rows = await store.inbox.take_queued("t", chat)
    conv = await store.conversations.active("t", chat)
    answer = await store.conversations.append(
        conv.id, Message.assistant(f"answer {n} " + "y" * 300), deliver=msg.message_id
    )
    async with store.transaction():
        await store.conversations.delivered(answer, f"p{n}")
        await store.inbox.answered([r.id for r in rows])


async def test_pruning_and_checkpoints_keep_the_files_bounded(tmp_path: Path) -> None:
    db_sizes: list[int] = []
    wal_most = 0
    round_started: list[float] = []
    async with SqliteStore(tmp_path / "r.db", wal_limit_bytes=WAL_LIMIT) as store:
        for r in range(ROUNDS):
            round_started.append(time.time())
            for i in range(PER_ROUND):
                await one_exchange(store, r * PER_ROUND + i)
                wal_most = max(wal_most, store.db.sizes()[1])
            if r >= 2:  # keep two rounds: everything from before the previous round goes
                cut = round_started[r - 1]
                pruned = await store.ops.prune(cut, history_before=cut)
                assert pruned.inbox == pruned.deliveries == PER_ROUND
                assert pruned.messages == 2 * PER_ROUND
            db_sizes.append(store.db.sizes()[0])
        kept = await store.ops.status()
    assert kept.messages == 2 * 2 * PER_ROUND  # two rounds of question and answer
    assert wal_most <= WAL_LIMIT
    grown_while_filling = db_sizes[1] - db_sizes[0]
    assert grown_while_filling > 100_000
    assert db_sizes[-1] <= db_sizes[2] * 1.1  # once pruning runs, freed pages are reused


async def test_housekeeping_truncates_the_wal_when_idle_and_stores_the_errors(
    tmp_path: Path,
) -> None:
    busy = 1
    errors = ErrorLog(redact=lambda t: t.replace("sk-secret", "***"))
    stop = use_error_log(errors)
    try:
        async with SqliteStore(tmp_path / "h.db") as store:
            keeper = Housekeeping(store, lambda: Retention(settled_days=7), lambda: busy)
            for n in range(200):
                await one_exchange(store, n)
            errors.note("telegram", "sendMessage: HTTP 502 with key sk-secret")
            await keeper.tick()
            assert store.db.sizes()[1] > 0  # work is running: the WAL is left alone
            busy = 0
            await keeper.tick()
            assert store.db.sizes()[1] == 0
            [error] = (await store.ops.status()).errors
            assert (error.channel, error.text) == ("telegram", "sendMessage: HTTP 502 with key ***")
            assert (await keeper.prune()).total == 0  # nothing is a week old
    finally:
        stop()


def test_pruning_runs_often_enough_for_the_shortest_retention() -> None:
    assert Retention().prune_every_s == 3600
    assert Retention(settled_days=7, keep_days=1 / 1440).prune_every_s == 10  # a minute: 10 s
    assert Retention(settled_days=0.1).prune_every_s == 864


async def test_housekeeping_on_postgresql_stores_errors_and_prunes_with_no_wal_work(
    postgres: PostgresServer,
) -> None:
    errors = ErrorLog()
    stop = use_error_log(errors)
    try:
        async with PgStore(postgres.new_database()) as store:
            keeper = Housekeeping(
                store,
                lambda: Retention(settled_days=7, keep_days=1e-9),  # history: only what is newer
                lambda: 0,  # idle: SQLite's WAL would be truncated now
            )
            for n in range(50):
                await one_exchange(store, n)
            errors.note("telegram", "sendMessage: HTTP 502")
            await keeper.tick()  # the first tick prunes too
            [error] = (await store.ops.status()).errors
            assert (error.channel, error.text) == ("telegram", "sendMessage: HTTP 502")
            counts = await store.ops.counts()
            assert counts.db_bytes > 0 and counts.wal_bytes is None
            assert (await store.ops.status()).messages == 0
            assert (await keeper.prune()).total == 0  # nothing more
            pruned = await store.ops.prune(time.time() + 1)
            assert pruned.inbox == 50  # the deliveries went with their messages
    finally:
        stop()
