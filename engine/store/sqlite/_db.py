# Left whole: one connection and its statements (its schema, faults, readers and batching are
# modules of their own).
"""One SQLite file, one connection, and the rules for writing to it.

aiosqlite runs the connection in its own thread, so the event loop never waits on the disk. The
file is in WAL mode with synchronous=NORMAL: a commit survives a crash of the process (not
necessarily of the machine's power). Statements are autocommit unless inside
:meth:`SqliteDb.transaction`; meanwhile a write from another task waits until it commits (or
would become part of it), and a read goes to a second connection (sqlite/_reader.py).

The WAL stays bounded: SQLite checkpoints it after every commit that takes it past a quarter of
`wal_limit_bytes` (``wal_autocheckpoint``), and truncates it back to the limit once a checkpoint
has copied everything (``journal_size_limit``); housekeeping truncates it to nothing when the bot
is idle (:meth:`SqliteDb.checkpoint`). Readers in other processes (`relaybot status`, `relaybot
backup`) open the file read-only (`readonly`): WAL lets them read while the daemon writes.
Files SQLite creates for a command run as root are given the store's owner
(:func:`owned_like_store`). Each call is timed (engine/metrics.py). Writes nobody waits for and
statements run together ride one trip (sqlite/_soon.py); writes of several tasks, one commit
(sqlite/_group.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiosqlite

from engine import metrics
from engine._clock import perf
from engine.store._db import SQLITE, Db, Row
from engine.store.sqlite._faults import Episodes, unavailable
from engine.store.sqlite._files import make_private, owned_like_store
from engine.store.sqlite._group import GroupCommit
from engine.store.sqlite._reader import Reader, reads
from engine.store.sqlite._schema import MIGRATIONS
from engine.store.sqlite._soon import Soon, atomic, dropped, run_writes
from engine.store.sqlite._trips import count_trips
from engine.store.sqlite._upgrade import Upgrade
from tools.errors import StoreError, StoreUnavailable

log = logging.getLogger("engine.store")

WAL_LIMIT_BYTES = 16 * 1024 * 1024
_PAGE_BYTES = 4096  # SQLite's default page size


class SqliteDb(Db):
    """The :class:`~engine.store._db.Db` of one SQLite file (``?`` placeholders as they are)."""

    dialect = SQLITE

    def __init__(
        self,
        path: str | Path,
        *,
        readonly: bool = False,
        wal_limit_bytes: int = WAL_LIMIT_BYTES,
        migrations: Sequence[str] = MIGRATIONS,
    ) -> None:
        super().__init__()
        self.path = Path(path)
        self.upgrade = Upgrade(self.path, migrations)  # its schema, checked and brought up
        self.readonly = readonly
        self.wal_limit_bytes = wal_limit_bytes
        self._db: aiosqlite.Connection | None = None
        self._tx_lock = asyncio.Lock()
        self._tx_owner: asyncio.Task[Any] | None = None
        self._begin = False  # a transaction is open whose BEGIN has not been sent yet
        self._later: list[tuple[str, Sequence[Any]]] = []  # execute_later
        self._soon = Soon(self._send_soon)  # execute_soon
        self._group = GroupCommit(self._write, lambda exc: unavailable(self.path, exc) is not None)
        self._owned: contextlib.ExitStack | None = None
        self._reader = Reader(self.path)  # reads beside another task's transaction
        self.episodes = Episodes(self.path)  # the machine refusing writes, said once
        self._opened = False  # open() finished

    @property
    def db(self) -> aiosqlite.Connection:
        if self._db is None:
            raise StoreError("the store is not open")
        return self._db

    @property
    def wal_path(self) -> Path:
        return self.path.with_name(self.path.name + "-wal")

    async def open(self) -> None:
        if self.readonly and not self.path.exists():
            raise StoreError(f"there is no store at {self.path} (see [storage] path)")
        self._owned = contextlib.ExitStack()
        self._owned.enter_context(owned_like_store(self.path))
        try:
            if self.readonly:
                uri = f"file:{quote(str(self.path.resolve()))}?mode=ro"
                connection = aiosqlite.connect(uri, uri=True, isolation_level=None)
            else:
                make_private(self.path)  # 0600 in a 0700 directory (_files.py)
                connection = aiosqlite.connect(self.path, isolation_level=None)
            # Its worker thread must never keep the process alive: committed data is safe in
            # the WAL whatever happens, and an unclosed store must not hang interpreter exit.
            # (A private attribute: aiosqlite is pinned below its next minor release.)
            connection._thread.daemon = True
            count_trips(connection)  # only for a benchmark that asks for it
            self._db = await connection
            self._db.row_factory = sqlite3.Row
            await self.upgrade.check(self, older_too=False)  # before anything writes to it
            if self.readonly:
                await self._db.execute("PRAGMA busy_timeout=5000")
                await self.upgrade.check(self, older_too=True)
                return
            pragmas = (
                "journal_mode=WAL",
                "synchronous=NORMAL",
                "foreign_keys=ON",
                "busy_timeout=5000",
                f"journal_size_limit={self.wal_limit_bytes}",
                f"wal_autocheckpoint={max(16, self.wal_limit_bytes // _PAGE_BYTES // 4)}",
            )
            await self._run(lambda conn: [conn.execute(f"PRAGMA {p}") for p in pragmas])
            await self.upgrade.migrate(self)
            await self._reader.open()
            self._opened = True
        except StoreUnavailable:
            await self.close()
            raise
        except (OSError, sqlite3.Error) as exc:
            await self.close()
            if (refused := unavailable(self.path, exc)) is not None:
                raise refused from exc  # a full disk, say: worth waiting for
            raise StoreError(f"cannot open the store at {self.path}: {exc}") from exc

    async def close(self) -> None:
        if self._soon and self._db is not None:
            with contextlib.suppress(sqlite3.Error, StoreUnavailable):
                await self._send_soon()
        self._soon.cancel()
        await self._reader.close()
        if self._db is not None:
            db, self._db = self._db, None
            await db.close()
        if self._owned is not None:
            owned, self._owned = self._owned, None
            owned.close()

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        """BEGIN IMMEDIATE ... COMMIT, one at a time, the BEGIN sent with the first statement;
        nested use joins the open one."""
        if self._tx_owner is not None and self._tx_owner is asyncio.current_task():
            yield
            return
        async with self._tx_lock:
            self._tx_owner = asyncio.current_task()
            self._begin = True
            try:
                yield
                if not self._begin or self._later:  # something was written (or read) inside
                    started = perf()
                    await self._run(lambda conn: conn.execute("COMMIT"), write=True, commit=True)
                    metrics.store_call("commit", started)
            except BaseException:
                # Also on cancellation: the BEGIN or COMMIT may still be queued in the db
                # thread, and the ROLLBACK queued after it runs after it, whatever happens here.
                if not self._begin:
                    with contextlib.suppress(sqlite3.OperationalError):
                        await asyncio.shield(self.db.execute("ROLLBACK"))
                raise
            finally:
                self._tx_owner = None
                self._begin = False
                self._later.clear()  # never sent: rolled back with the rest

    def in_transaction(self) -> bool:
        return self._tx_owner is not None and self._tx_owner is asyncio.current_task()

    def _begun_elsewhere(self) -> bool:
        """Another task's transaction has sent its BEGIN (sqlite/_reader.py)."""
        return self._tx_owner is not None and not self._begin and not self.in_transaction()

    async def _run(
        self, fn: Callable[[sqlite3.Connection], Any], *, write: bool = False, commit: bool = False
    ) -> Any:
        """`fn(connection)` in the db thread, after a pending BEGIN and "later" writes; soon
        writes where no transaction is open. (aiosqlite's private ``_execute``/``_conn``: pinned.)
        A refusal by the machine raises :class:`StoreUnavailable` (sqlite/_faults.py)."""
        begin, later = False, list[tuple[str, Sequence[Any]]]()
        if self.in_transaction():
            begin, self._begin = self._begin, False  # sent with this statement
            later, self._later = self._later, []
        soon = self._soon.take() if self._soon and (self._tx_owner is None or begin) else []
        after = self._soon.take() if self._soon and commit else []

        def call() -> Any:
            conn = self.db._conn
            failed = run_writes(conn, soon)
            if begin:
                conn.execute("BEGIN IMMEDIATE")
            for sql, params in later:
                conn.execute(sql, params)
            result = fn(conn)
            return result, failed + run_writes(conn, after)

        try:
            result, failed = await self.db._execute(call)
        except sqlite3.Error as exc:
            self._soon.put_back(after)  # never sent: the statement before them failed
            refused = unavailable(self.path, exc)
            if refused is None:
                raise
            if self._opened:  # at start-up the caller says it, once a minute
                self.episodes.refusal(refused)
            raise refused from exc
        dropped(failed, self.path, self.episodes)
        if write and self.episodes.failing:
            self.episodes.written()
        return result

    async def run(self, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        """`fn(connection)` in the db thread, as a statement of the open transaction (an
        upgrade's migrations: sqlite/_upgrade.py)."""
        return await self._run(fn)

    async def _send_soon(self) -> None:
        """The writes queued by execute_soon, in a trip of their own."""
        async with self._tx_lock:
            if self._soon and self._db is not None:
                await self._run(lambda conn: None, write=True)

    async def _write(self, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        """`fn` as a write: outside a transaction it waits until an open one commits."""
        if self.in_transaction():
            return await self._run(fn)
        async with self._tx_lock:
            return await self._run(fn, write=True)

    async def execute(self, sql: str, *params: Any) -> int:
        """A write; outside a transaction, grouped with others' (sqlite/_group.py)."""
        started = perf()
        if self.in_transaction():
            count = (await self._run(lambda conn: conn.execute(sql, params))).rowcount
        else:
            count = await self._group.execute(sql, params)
        metrics.store_call("write", started)
        return int(count)

    async def execute_later(self, sql: str, *params: Any) -> None:
        """Sent with a transaction's next statement or COMMIT (one trip); outside one, now."""
        if self.in_transaction():
            self._later.append((sql, params))
        else:
            await self.execute(sql, *params)

    async def execute_soon(self, sql: str, *params: Any) -> None:
        """Sent with the store's next trip, at most ``SOON_S`` later (sqlite/_soon.py)."""
        self.db  # noqa: B018 (raises when the store is not open)
        self._soon.add(sql, params)

    async def together(self, *statements: tuple[str, Sequence[Any]]) -> list[list[Row]]:
        """The statements in one trip, in one transaction (the open one, or their own)."""
        started = perf()
        if self.in_transaction():
            rows = await self._run(lambda conn: atomic(conn, statements, own=False))
        else:
            async with self._tx_lock:
                rows = await self._run(lambda conn: atomic(conn, statements, own=True), write=True)
        metrics.store_call("write", started)
        return rows

    async def fetch(self, sql: str, *params: Any) -> list[Row]:
        started = perf()
        if reads(sql) and self._begun_elsewhere():  # what it wrote may yet roll back
            rows = await self._reader.fetch(sql, params)
            metrics.store_call("read", started)
        elif reads(sql):
            rows = await self._run(lambda conn: conn.execute(sql, params).fetchall())
            metrics.store_call("read", started)
        else:  # INSERT ... RETURNING and the like: a write
            rows = await self._write(lambda conn: conn.execute(sql, params).fetchall())
            metrics.store_call("write", started)
        return list(rows)

    async def size(self) -> tuple[int, int | None]:
        return self.sizes()

    async def compact(self) -> None:
        if self.sizes()[1]:  # a WAL with something in it
            await self.checkpoint()

    async def checkpoint(self) -> bool:
        """Copy the WAL into the database and truncate it to nothing; False when a reader in
        another process kept it from finishing (the next call tries again)."""
        async with self._tx_lock:  # never inside a transaction of this connection
            row = await self.fetchrow("PRAGMA wal_checkpoint(TRUNCATE)")
        return row is not None and row[0] == 0

    def sizes(self) -> tuple[int, int]:  # the file's and the WAL's, in bytes (0: missing)
        return _size(self.path), _size(self.wal_path)

    async def schema_version(self) -> int:
        row = await self.fetchrow("PRAGMA user_version")
        return int(row[0]) if row else 0

    async def settled(self) -> None:
        """The daemon runs on this store: the copy an earlier upgrade made is not needed."""
        if not self.readonly:
            await self.upgrade.settled()


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
