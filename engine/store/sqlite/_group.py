"""Writes of several tasks committed together: one trip to the SQLite thread, one commit.

A single write outside a transaction is a trip of its own (the event loop hands it to the
database thread and is woken with the result) and a commit of its own (a WAL append). When a
hundred chats write at once (a Telegram batch of a hundred updates, each kept in the inbox
before the batch is confirmed) they queued one behind the other, and behind every other chat's
reads: the batch, and the next getUpdates, waited for all of them in turn.

:class:`GroupCommit` queues the writes that arrive while one is on its way and sends them
together as soon as it is back, in one transaction (a group commit): a write alone still goes
at once and alone. Each caller returns once its write is committed, with its own row count or
its own error (a constraint fails that statement only, SQLite undoes just it); a refusal by the
machine (a full disk, see sqlite/_faults.py) fails the whole group, since none of it is
committed, and each caller sees it.
"""

from __future__ import annotations

import asyncio
import functools
import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

Fn = Callable[[sqlite3.Connection], Any]


@dataclass(slots=True)
class _Write:
    sql: str
    params: Sequence[Any]
    done: asyncio.Future[int] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class GroupCommit:
    """The writes waiting for the one on its way, sent by `send` (a write trip, under the
    store's write lock); `machine` tells a refusal by the machine from a statement's own error."""

    def __init__(
        self, send: Callable[[Fn], Awaitable[Any]], machine: Callable[[sqlite3.Error], bool]
    ) -> None:
        self._send = send
        self._machine = machine
        self._waiting: list[_Write] = []
        self._sender: asyncio.Task[None] | None = None

    async def execute(self, sql: str, params: Sequence[Any]) -> int:
        """`sql` committed (with whatever else was waiting); its row count."""
        write = _Write(sql, params)
        self._waiting.append(write)
        if self._sender is None:
            self._sender = asyncio.ensure_future(self._send_all())
        return await write.done

    async def _send_all(self) -> None:
        try:
            while self._waiting:
                group, self._waiting = self._waiting, []
                writes = [(w.sql, w.params) for w in group]
                run = functools.partial(together, writes=writes, machine=self._machine)
                try:
                    outcomes = await self._send(run)
                except BaseException as exc:
                    for w in group:
                        if not w.done.done():
                            w.done.set_exception(exc)
                    if isinstance(exc, asyncio.CancelledError):
                        raise
                    continue
                for w, outcome in zip(group, outcomes, strict=True):
                    if w.done.done():
                        continue
                    if isinstance(outcome, BaseException):
                        w.done.set_exception(outcome)
                    else:
                        w.done.set_result(outcome)
        finally:
            self._sender = None
            for w in self._waiting:  # cancelled with writes still waiting: they were not sent
                w.done.cancel()
            self._waiting = []


def together(
    conn: sqlite3.Connection,
    writes: Sequence[tuple[str, Sequence[Any]]],
    machine: Callable[[sqlite3.Error], bool],
) -> list[int | sqlite3.Error]:
    """In the database thread: `writes` in one transaction (a single one autocommit), each one's
    row count or error; a refusal by the machine rolls all back and is raised."""
    if len(writes) == 1:
        sql, params = writes[0]
        return [conn.execute(sql, params).rowcount]
    conn.execute("BEGIN IMMEDIATE")
    outcomes: list[int | sqlite3.Error] = []
    try:
        for sql, params in writes:
            try:
                outcomes.append(conn.execute(sql, params).rowcount)
            except sqlite3.Error as exc:
                if machine(exc) or not conn.in_transaction:  # SQLite gave the whole group up
                    raise
                outcomes.append(exc)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return outcomes
