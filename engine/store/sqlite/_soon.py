"""Writes nobody waits for, sent to the SQLite thread with the store's next trip; and several
statements in one trip (:func:`atomic`, for :meth:`SqliteDb.together`).

A counter added to (what a request cost, a turn's tokens) is read by nobody at the moment it is
written, and its failure only matters to the log. Handing each to the database thread on its
own costs a round trip (a wake-up of that thread and of the event loop) per write, so
:meth:`SqliteDb.execute_soon` queues it here instead: it goes to the thread with the next piece
of work that runs outside a transaction (before it), with the first statement of a transaction
(before its BEGIN), or with a COMMIT (after it), each write committing on its own, in the order
they were queued; statements sent later see them, as if each had been sent at once. When no
other trip comes within :data:`SOON_S`, they go on their own; closing the store sends them too.

What that trades: a write is in the file at most SOON_S later than it would have been, so a
process killed in between loses it (a counter short by one request); a write that fails is
logged and dropped, never raised to a caller that has moved on.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from engine.store.sqlite._faults import Episodes, unavailable

log = logging.getLogger("engine.store")

SOON_S = 0.05  # the longest a write waits for another trip to go with

Write = tuple[str, Sequence[Any]]


class Soon:
    """The queued writes of one connection, and the timer that sends them on their own."""

    def __init__(self, flush: Callable[[], Awaitable[None]]) -> None:
        self._writes: list[Write] = []
        self._flush = flush  # a trip of its own, carrying them (under the write lock)
        self._timer: asyncio.TimerHandle | None = None
        self._flushing: set[asyncio.Task[None]] = set()

    def __bool__(self) -> bool:
        return bool(self._writes)

    def add(self, sql: str, params: Sequence[Any]) -> None:
        self._writes.append((sql, params))
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(SOON_S, self._due)

    def put_back(self, writes: list[Write]) -> None:
        """Writes a trip took but never ran (the statement before them failed): first again."""
        if writes:
            self._writes[:0] = writes
            if self._timer is None:
                self._timer = asyncio.get_running_loop().call_later(SOON_S, self._due)

    def take(self) -> list[Write]:
        """The writes queued so far, for a trip about to go (none are left queued)."""
        writes, self._writes = self._writes, []
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        return writes

    def _due(self) -> None:
        self._timer = None
        if self._writes:
            task = asyncio.ensure_future(self._flush())
            self._flushing.add(task)
            task.add_done_callback(self._flushed)

    def _flushed(self, task: asyncio.Task[None]) -> None:
        self._flushing.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("writes of counters could not be sent to the store: %s", exc)

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def run_writes(conn: sqlite3.Connection, writes: Sequence[Write]) -> list[sqlite3.Error]:
    """In the database thread: each write on its own (autocommit); the errors, in order."""
    failed: list[sqlite3.Error] = []
    for sql, params in writes:
        try:
            conn.execute(sql, params)
        except sqlite3.Error as exc:
            failed.append(exc)
    return failed


def dropped(failed: Sequence[sqlite3.Error], path: Path, episodes: Episodes) -> None:
    """Writes nobody waited for failed: said (a refusal by the machine, once), and dropped."""
    for exc in failed:
        if (refused := unavailable(path, exc)) is not None:
            episodes.refusal(refused)
        else:
            log.error("a write of counters to the store failed and was dropped: %s", exc)


def atomic(conn: sqlite3.Connection, statements: Sequence[Write], *, own: bool) -> list[Any]:
    """In the database thread: `statements` in order, each one's rows; in a transaction of
    their `own` (BEGIN ... COMMIT, rolled back on an error), or in the one already open."""
    if not own:
        return [conn.execute(sql, params).fetchall() for sql, params in statements]
    conn.execute("BEGIN IMMEDIATE")
    try:
        rows = [conn.execute(sql, params).fetchall() for sql, params in statements]
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return rows
