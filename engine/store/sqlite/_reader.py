"""Reads that must not see another task's uncommitted writes: a second connection to the file.

The store has one connection (sqlite/_db.py), shared by every task. While one task's transaction
is open (its BEGIN sent), a read by another task on that connection would see what the
transaction wrote and may yet roll back; on PostgreSQL each task's statements go to a connection
of their own and never see it. One rule for both backends: a task reads what is committed, and
what its own open transaction wrote. So such a read goes to this second connection (a thread of
its own): in WAL mode it reads the last committed state without waiting for the writer. Every
other read (no transaction open, or one not yet begun, or the transaction's own task) stays on
the one connection, so the hot path costs what it did.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiosqlite

from engine.store._db import Row
from engine.store.sqlite._faults import unavailable
from engine.store.sqlite._trips import count_trips
from tools.errors import StoreError


class Reader:
    """A read-only (``query_only``) connection to the store's file, opened with the store."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db: aiosqlite.Connection | None = None

    async def open(self) -> None:
        connection = aiosqlite.connect(self.path, isolation_level=None)
        connection._thread.daemon = True  # as the store's own (sqlite/_db.py)
        count_trips(connection)
        self._db = await connection
        self._db.row_factory = sqlite3.Row
        await self._db.execute("PRAGMA query_only=1")
        await self._db.execute("PRAGMA busy_timeout=5000")

    async def close(self) -> None:
        if self._db is not None:
            db, self._db = self._db, None
            await db.close()

    async def fetch(self, sql: str, params: Sequence[Any]) -> list[Row]:
        if self._db is None:
            raise StoreError("the store is not open")
        try:
            return list(await self._db.execute_fetchall(sql, params))
        except sqlite3.Error as exc:
            if (refused := unavailable(self.path, exc)) is not None:
                raise refused from exc
            raise


@functools.lru_cache(maxsize=1024)
def reads(sql: str) -> bool:
    """Whether `sql` only reads (so it need not wait for another task's transaction)."""
    return sql.lstrip().split(None, 1)[0].upper() in ("SELECT", "PRAGMA")
