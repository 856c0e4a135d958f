"""The listening connection of a PostgreSQL store: LISTEN for the instances' notifications, and
the heartbeat's write, on a connection of its own that is made again by itself when lost.

A connection of its own, not one of the pool's: an instance's heartbeat is then never held up
by its own busy pool, and it fails exactly when notifications would (a lost LISTEN connection
misses them). A dead socket is noticed on the next read or write, so the connection is asked
something every second. After it was made again, the reconnect hooks look at the tables for
what was said meanwhile.

A statement here is never cancelled, however long it takes (:meth:`Listening.ask`): cancelling
asyncpg mid-protocol (``asyncio.wait_for`` did) can leave the connection busy for the next
statement ("cannot switch to state 12; another operation is in progress"). One that takes
too long has its connection dropped instead, and a new one is made.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import asyncpg

from engine._backoff import Backoff
from engine.store._db import Listener, numbered
from engine.store.postgres._faults import UNREACHABLE
from tools.errors import StoreUnavailable

log = logging.getLogger("engine.store")

ASK_EVERY_S = 1.0  # the connection is asked something this often, to notice a dead socket
_ASK_S = 5.0  # ... and dropped when the answer takes longer than this


class Listening:
    """The listening connection (:meth:`start`), its one-at-a-time statements (:meth:`ask`)
    and its reconnect hooks; `listeners` (by channel) is read at each (re)connection."""

    def __init__(
        self, url: str, attrs: str | None, where: str, listeners: Mapping[str, list[Listener]]
    ) -> None:
        self.url = url
        self.where = where
        self._attrs = attrs
        self._listeners = listeners
        self.conn: Any = None
        self._lock = asyncio.Lock()  # one statement at a time on the connection
        self._lost = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._on_reconnect: list[Callable[[], Awaitable[None]]] = []

    @property
    def started(self) -> bool:
        return self._task is not None

    def on_reconnect(self, hook: Callable[[], Awaitable[None]]) -> None:
        self._on_reconnect.append(hook)

    async def start(self) -> None:
        """Open the connection; it is made again by itself until :meth:`close`."""
        if self._task is not None:
            return
        await self._connect()
        self._task = asyncio.create_task(self._keep(), name="pg-listen")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
            self._task = None
        if self.conn is not None:
            conn, self.conn = self.conn, None
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.close(), 2)

    def lost(self) -> None:
        """Make the connection again (to a server that takes writes, if the URL names one)."""
        self._lost.set()

    async def ask(self, sql: str, args: tuple[Any, ...], timeout: float) -> str:
        """Run `sql` here, after the statement before it, waiting at most `timeout` seconds
        (StoreUnavailable after that: the connection is dropped, never the statement
        cancelled); returns its status ("UPDATE 1")."""
        conn = self.conn
        if conn is None or conn.is_closed():
            raise StoreUnavailable(f"the database at {self.where} is unreachable")

        async def run() -> str:
            async with self._lock:
                return str(await conn.execute(numbered(sql), *args))

        task = asyncio.ensure_future(run())
        # Its failure is seen even when nobody waits for it any more: the connection was
        # dropped below, or the asker was cancelled (a close) while it ran.
        task.add_done_callback(_retrieved)
        done, _ = await asyncio.wait([task], timeout=timeout)
        if done:
            try:
                return task.result()
            except asyncpg.InternalClientError as exc:  # out of step: no statement can follow
                conn.terminate()
                self._lost.set()
                raise StoreUnavailable(f"the database at {self.where} is unreachable") from exc
        conn.terminate()
        self._lost.set()
        raise StoreUnavailable(
            f"the database at {self.where} did not answer within {timeout:.1f} s"
        )

    async def _connect(self) -> None:
        conn = await asyncpg.connect(self.url, timeout=10, target_session_attrs=self._attrs)
        lost = asyncio.Event()
        conn.add_termination_listener(lambda _c: lost.set())
        for channel, listeners in self._listeners.items():

            def deliver(
                _c: Any, _pid: int, _ch: str, payload: str, ls: list[Listener] = listeners
            ) -> None:
                for listener in ls:
                    listener(payload)

            await conn.add_listener(channel, deliver)
        self.conn = conn
        self._lost = lost

    async def _keep(self) -> None:
        while True:
            while not self._lost.is_set():
                try:
                    await self.ask("SELECT 1", (), _ASK_S)
                except (*UNREACHABLE, asyncpg.PostgresError, StoreUnavailable):
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._lost.wait(), ASK_EVERY_S)
            with contextlib.suppress(Exception):
                self.conn.terminate()
            backoff = Backoff(0.2, max_s=5)
            while True:
                try:
                    await self._connect()
                    break
                except (*UNREACHABLE, asyncpg.PostgresError):
                    await backoff.sleep()
            for hook in self._on_reconnect:
                try:
                    await hook()
                except Exception:
                    log.exception("after the database came back")


def _retrieved(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()  # a dropped connection's statement fails: expected, not logged
