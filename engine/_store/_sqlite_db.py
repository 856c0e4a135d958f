"""One SQLite file, one connection, and the rules for writing to it.

aiosqlite runs the connection in its own thread, so the event loop never waits on the disk. The
file is in WAL mode with synchronous=NORMAL: a commit survives a crash of the process (not
necessarily of the machine's power). Statements are autocommit unless inside
:meth:`SqliteDb.transaction`; a write from another task waits until an open transaction commits,
or it would silently become part of it (and not be durable when its caller returns).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import aiosqlite

from engine._store._sqlite_schema import MIGRATIONS
from tools import StoreError

log = logging.getLogger("engine.store")


class SqliteDb:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._db: aiosqlite.Connection | None = None
        self._tx_lock = asyncio.Lock()
        self._tx_owner: asyncio.Task[Any] | None = None

    @property
    def db(self) -> aiosqlite.Connection:
        if self._db is None:
            raise StoreError("the store is not open")
        return self._db

    async def open(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            connection = aiosqlite.connect(self.path, isolation_level=None)
            # Its worker thread must never keep the process alive: committed data is safe in
            # the WAL whatever happens, and an unclosed store must not hang interpreter exit.
            # (A private attribute: aiosqlite is pinned below its next minor release.)
            connection._thread.daemon = True
            self._db = await connection
            self._db.row_factory = sqlite3.Row
            await self._refuse_newer()  # before anything writes to the file
            for pragma in (
                "journal_mode=WAL",
                "synchronous=NORMAL",
                "foreign_keys=ON",
                "busy_timeout=5000",
            ):
                await self._db.execute(f"PRAGMA {pragma}")
            await self._migrate()
        except (OSError, sqlite3.Error) as exc:
            await self.close()
            raise StoreError(f"cannot open the store at {self.path}: {exc}") from exc

    async def close(self) -> None:
        if self._db is not None:
            db, self._db = self._db, None
            await db.close()

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        """BEGIN IMMEDIATE ... COMMIT, one at a time; nested use joins the open one."""
        if self._tx_owner is not None and self._tx_owner is asyncio.current_task():
            yield
            return
        async with self._tx_lock:
            self._tx_owner = asyncio.current_task()
            try:
                await self.db.execute("BEGIN IMMEDIATE")
                yield
                await self.db.execute("COMMIT")
            except BaseException:
                # Also on cancellation: the BEGIN or COMMIT may still be queued in the db
                # thread, and the ROLLBACK queued after it runs after it, whatever happens here.
                with contextlib.suppress(sqlite3.OperationalError):
                    await asyncio.shield(self.db.execute("ROLLBACK"))
                raise
            finally:
                self._tx_owner = None

    async def write(self, sql: str, params: Sequence[Any] = ()) -> aiosqlite.Cursor:
        if self._tx_owner is not None and self._tx_owner is asyncio.current_task():
            return await self.db.execute(sql, params)
        async with self._tx_lock:
            return await self.db.execute(sql, params)

    async def one(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Row | None:
        rows = await self.db.execute_fetchall(sql, params)  # one trip to the db thread
        return next(iter(rows), None)

    async def all(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        return list(await self.db.execute_fetchall(sql, params))

    async def schema_version(self) -> int:
        row = await self.one("PRAGMA user_version")
        return int(row[0]) if row else 0

    async def _refuse_newer(self) -> None:
        version = await self.schema_version()
        if version > len(MIGRATIONS):
            raise StoreError(
                f"the store at {self.path} has schema version {version}, newer than this "
                f"relaybot knows ({len(MIGRATIONS)}): it was written by a newer relaybot. "
                "Upgrade relaybot, or restore a backup made by this version; the file was "
                "left untouched."
            )

    async def _migrate(self) -> None:
        version = await self.schema_version()
        for number, script in enumerate(MIGRATIONS[version:], start=version + 1):
            statements = [s for s in script.split(";") if s.strip()]
            async with self.transaction():
                for stmt in statements:
                    await self.db.execute(stmt)
                await self.db.execute(f"PRAGMA user_version = {number}")
            log.info("store migrated to schema version %d", number)


def marks(n: int) -> str:
    return ",".join("?" * n)
