"""Hearing of writes another process made to the SQLite file: ``PRAGMA data_version``, read at
most once a second.

The daemon keeps rows of its store in memory as if it were the only writer, but the command
line writes the same file while it runs (`relaybot users revoke`, `relaybot forget`, `relaybot
users allow`). SQLite gives each connection a number that changes when another connection
committed: reading it is one trip to the database thread, so it is read on a timer (once a
second, whatever the traffic), never per message. When it moved, nobody knows what changed:
every cached row goes and every part that keeps rows hears of it (:meth:`Db.outside_write`),
so what another process wrote is in force here within about a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import Awaitable, Callable

import aiosqlite

from tools.errors import StoreError

log = logging.getLogger("engine.store")

WATCH_S = 1.0  # how often the data version is read


class Watch:
    """Reads the connection's data version every `every_s` and calls `changed` when it moved,
    from :meth:`start` until :meth:`stop`."""

    def __init__(
        self,
        connection: Callable[[], aiosqlite.Connection],
        changed: Callable[[], Awaitable[None]],
        every_s: float = WATCH_S,
    ) -> None:
        self._connection = connection
        self._changed = changed
        self.every_s = every_s
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="store-watch")

    async def stop(self) -> None:
        if self._task is not None:
            task, self._task = self._task, None
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

    async def _read(self) -> int:
        async with self._connection().execute("PRAGMA data_version") as cursor:
            row = await cursor.fetchone()
        return int(row[0]) if row is not None else 0

    async def _run(self) -> None:
        seen = await self._read()
        while True:
            await asyncio.sleep(self.every_s)  # a periodic timer, not a wait for something
            try:
                now = await self._read()
            except (sqlite3.Error, StoreError) as exc:  # closing, or the disk away: next time
                log.debug("could not read the data version: %s", exc)
                continue
            if now == seen:
                continue
            seen = now
            try:
                await self._changed()
            except (sqlite3.Error, StoreError) as exc:
                log.warning("another process wrote the store; reading it again failed: %s", exc)
