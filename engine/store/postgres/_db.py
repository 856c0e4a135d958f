"""One PostgreSQL database that several relaybot processes share: a pool, transactions, and
LISTEN for notifications; the schema is checked or migrated at open (postgres/_upgrade.py).

asyncpg, a pool of connections. A statement outside :meth:`PgDb.transaction` runs on any pooled
connection and commits at once (as the SQLite backend's autocommit statements do); inside it,
every statement of the current task goes to the one connection the block holds, so the parts'
writes commit together. Nested use joins the open block; a task spawned inside it does not (its
statements are its own), as in the SQLite backend.

A server that cannot be reached or take a write now (a standby, mid-failover) is
:class:`tools.StoreUnavailable` (``_faults``): nothing was committed, and callers must not
acknowledge what depended on it. Broken connections are replaced (by the host taking writes).

URLs are shown without their password. `readonly` (`relaybot status`) migrates nothing.
Statements are timed for engine/metrics.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import asyncpg

from engine import metrics
from engine._clock import perf
from engine.store._db import POSTGRES, Db, Row, numbered
from engine.store._opening._urls import redact
from engine.store.postgres._faults import READ_ONLY, UNREACHABLE, reason, session_attrs, unavailable
from engine.store.postgres._listen import Listening
from engine.store.postgres._soon import HeldCounters
from engine.store.postgres._upgrade import migrate, readable_from, refuse_other_versions
from tools.errors import StoreError, StoreUnavailable

log = logging.getLogger("engine.store")


def rowcount(status: str) -> int:
    """The number of rows a command touched, from its status ("UPDATE 1", "INSERT 0 1")."""
    tail = status.rsplit(" ", 1)[-1]
    return int(tail) if tail.isdigit() else 0


class PgDb(Db):
    """The :class:`~engine.store._db.Db` of one PostgreSQL database: each statement's ``?``
    placeholders become ``$1..$n`` once (cached by its text)."""

    dialect = POSTGRES

    def __init__(
        self, url: str, *, max_connections: int = 10, readonly: bool = False, check: bool = True
    ) -> None:
        super().__init__()
        self.check = check  # read-only: refuse a store of another schema version
        self.url = url
        self.max_connections = max_connections
        self.readonly = readonly
        self._pool: asyncpg.Pool | None = None
        self._tx: contextvars.ContextVar[tuple[asyncio.Task[Any] | None, Any] | None] = (
            contextvars.ContextVar(f"pg-tx-{id(self)}", default=None)
        )
        self._attrs = session_attrs(url, readonly=readonly)
        self._listening = Listening(url, self._attrs, self.where, self._listeners)
        self._counters = HeldCounters()  # execute_soon's, while the store is unavailable

    @property
    def where(self) -> str:
        return redact(self.url)

    @property
    def pool(self) -> asyncpg.Pool:
        if self._pool is None:
            raise StoreError("the store is not open")
        return self._pool

    async def open(self) -> None:
        try:
            self._pool = await asyncpg.create_pool(
                self.url,
                min_size=1,
                max_size=self.max_connections,
                timeout=10,
                reset=_no_reset,
                target_session_attrs=self._attrs,
                server_settings={"default_transaction_read_only": "on"} if self.readonly else None,
            )
            if self.readonly:
                if self.check:
                    version, readable = await self.stored_version(), await self.readable_from()
                    refuse_other_versions(version, self.where, readable)
            else:
                await migrate(self.pool, self.where)
        except StoreError:
            await self.close()
            raise
        except UNREACHABLE as exc:
            await self.close()
            raise unavailable(self.where, exc, opening=True) from exc
        except (asyncpg.PostgresError, ValueError) as exc:
            await self.close()
            raise StoreError(f"cannot open the store at {self.where}: {reason(exc)}") from exc

    async def close(self) -> None:
        await self._counters.close(self.execute)  # those kept while the store was away
        await self._listening.close()
        if self._pool is not None:
            pool, self._pool = self._pool, None
            try:
                await asyncio.wait_for(pool.close(), 5)
            except Exception:
                pool.terminate()

    # -- statements -----------------------------------------------------------------------

    def _held(self) -> Any:
        held = self._tx.get()
        if held is not None and held[0] is asyncio.current_task():
            return held[1]
        return None

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        """One transaction for the current task's statements; nested use joins the open one."""
        if self._held() is not None:
            yield
            return
        try:
            conn = await self.pool.acquire()
        except UNREACHABLE as exc:
            raise await self._unavailable(exc) from exc
        try:
            tx = conn.transaction()
            await tx.start()
            token = self._tx.set((asyncio.current_task(), conn))
            try:
                yield
            except BaseException:
                self._tx.reset(token)
                with contextlib.suppress(*UNREACHABLE, asyncpg.PostgresError):
                    await asyncio.shield(tx.rollback())
                raise
            self._tx.reset(token)
            started = perf()
            await tx.commit()
            metrics.store_call("commit", started)
        except UNREACHABLE as exc:
            raise await self._unavailable(exc) from exc
        finally:
            await self.pool.release(conn)

    async def _run(self, method: str, sql: str, args: tuple[Any, ...]) -> Any:
        sql = numbered(sql)
        conn = self._held()
        started = perf()
        try:
            if conn is not None:
                result = await getattr(conn, method)(sql, *args)
            else:
                result = await getattr(self.pool, method)(sql, *args)
        except UNREACHABLE as exc:
            raise await self._unavailable(exc) from exc
        metrics.store_call("write" if method == "execute" else "read", started)
        return result

    async def _unavailable(self, exc: BaseException) -> StoreUnavailable:
        """`exc` as the store being unavailable; a write refused by a read-only server has the
        pool's connections replaced, each by one to a host that takes writes (if any now)."""
        if isinstance(exc, READ_ONLY) and self._pool is not None:
            await self._pool.expire_connections()
        return unavailable(self.where, exc)

    async def execute(self, sql: str, *args: Any) -> int:
        """Run a write; returns how many rows it touched."""
        return rowcount(await self._run("execute", sql, args))

    async def execute_soon(self, sql: str, *args: Any) -> None:
        await self._counters.send(self.execute, sql, args)  # kept while the store is away

    async def fetch(self, sql: str, *args: Any) -> list[Row]:
        return list(await self._run("fetch", sql, args))

    async def fetchrow(self, sql: str, *args: Any) -> Row | None:
        return await self._run("fetchrow", sql, args)

    async def fetchval(self, sql: str, *args: Any) -> Any:
        return await self._run("fetchval", sql, args)

    # -- schema ---------------------------------------------------------------------------

    async def schema_version(self) -> int:
        return int(await self.fetchval("SELECT version FROM schema_version") or 0)

    async def stored_version(self) -> int:
        """The schema version, 0 for a database relaybot never migrated (read-only)."""
        exists = await self.fetchval("SELECT to_regclass('schema_version') IS NOT NULL")
        return await self.schema_version() if exists else 0

    async def readable_from(self) -> int | None:
        """The schema_compat marker (migration 23): the oldest schema whose relaybot runs on
        this database; None when it has none."""
        async with self.pool.acquire() as conn:
            return await readable_from(conn)

    # -- notifications --------------------------------------------------------------------

    async def on_listener(self, sql: str, *args: Any, timeout: float) -> int:
        """Run a write on the listening connection (postgres/_listen.py), not the pool;
        StoreUnavailable when it takes longer than `timeout` seconds."""
        try:
            if not self._listening.started:  # not listening (yet): any connection will do
                return rowcount(await self.pool.execute(numbered(sql), *args, timeout=timeout))
            return rowcount(await self._listening.ask(sql, args, timeout))
        except UNREACHABLE as exc:
            if isinstance(exc, READ_ONLY) and self._listening.started:  # on a standby
                self._listening.lost()  # reconnects, to a server taking writes if any now
            raise await self._unavailable(exc) from exc

    async def notify(self, channel: str) -> None:
        """NOTIFY `channel`: every instance listening hears it (inside a transaction, at its
        commit); this one's listeners at once too."""
        await super().notify(channel)
        await self.execute(f"NOTIFY {channel}")

    async def size(self) -> tuple[int, int | None]:
        """The database's size; no write-ahead log of relaybot's own (the server's is its)."""
        return int(await self.fetchval("SELECT pg_database_size(current_database())")), None

    def on_reconnect(self, hook: Callable[[], Awaitable[None]]) -> None:
        """Run `hook` after the listening connection was lost and made again (notifications
        sent meanwhile were missed: look at the tables instead)."""
        self._listening.on_reconnect(hook)

    async def listen(self) -> None:
        """Open the listening connection; it reconnects by itself until :meth:`close`."""
        await self._listening.start()


async def _no_reset(_connection: Any) -> None:
    """A pooled connection goes back as it is: relaybot leaves no session state on one (its
    LISTEN is on a connection of its own, its locks last a transaction), so asyncpg's default
    reset (``pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL``) would only cost a
    round trip per statement. An unfinished transaction is still rolled back by asyncpg."""
