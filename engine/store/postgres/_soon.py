"""Counters written while the PostgreSQL store cannot take them (a restart, a failover): kept in
memory and written once it can again, instead of being lost with a log line each.

A counter added to (what a request cost, a grant used) is a write nobody waits for
(:meth:`engine.store._db.Db.execute_soon`). While the database is up it goes at once, on any
pooled connection, as before. When one is refused because the store is unavailable, it is kept,
and so is every counter after it; the next counter written once the store takes writes again
sends them all, in order, in a task of its own (the caller does not wait for them). Turns that
end during a failover are then still counted against the day's spending and limits.

What that trades: at most :data:`MAX_HELD` are kept (the oldest go first, counted), and they
live in this process only (a process that ends before the store is back loses them, said at
close). A write cut off with its connection may have been committed all the same, so a
counter can, rarely, count one request twice. The outage itself is said by the instances'
heartbeat; here one line when counters start being kept, one when they are written.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from tools.errors import StoreUnavailable

log = logging.getLogger("engine.store")

MAX_HELD = 10_000

Execute = Callable[..., Awaitable[int]]


class HeldCounters:
    def __init__(self) -> None:
        self._writes: collections.deque[tuple[str, tuple[Any, ...]]] = collections.deque()
        self._dropped = 0
        self._held = 0  # kept since the store last took them
        self._sending: asyncio.Task[None] | None = None

    async def send(self, execute: Execute, sql: str, args: tuple[Any, ...]) -> None:
        """Write a counter now, or keep it (behind those kept already) for later."""
        if not self._writes:
            try:
                await execute(sql, *args)
                return
            except StoreUnavailable as exc:
                self._keep(sql, args, exc)
                return
        self._keep(sql, args, None)
        if self._sending is None:  # one task sends them; those kept meanwhile go with it
            self._sending = asyncio.create_task(self._send_kept(execute), name="pg-counters")
            self._sending.add_done_callback(self._sent)

    def _keep(self, sql: str, args: tuple[Any, ...], why: StoreUnavailable | None) -> None:
        if why is not None and not self._writes:
            log.warning(
                "counters (what requests cost, the uses of grants) cannot be written now (%s): "
                "they are kept in memory, up to %d, and written once the database takes writes",
                why,
                MAX_HELD,
            )
        self._writes.append((sql, args))
        self._held += 1
        if len(self._writes) > MAX_HELD:
            self._writes.popleft()
            self._dropped += 1

    async def _send_kept(self, execute: Execute) -> None:
        while self._writes:
            sql, args = self._writes.popleft()
            try:
                await execute(sql, *args)
            except StoreUnavailable:
                self._writes.appendleft((sql, args))
                return  # still away: the next counter written tries again
            except asyncio.CancelledError:  # the store closes: said there
                self._writes.appendleft((sql, args))
                raise
            except Exception as exc:  # not the store's absence: this write cannot be made
                log.error("a counter kept for the store could not be written: %s", exc)
        dropped = f" ({self._dropped} more were dropped: over {MAX_HELD})" if self._dropped else ""
        written = self._held - self._dropped
        log.info("wrote the %d counters kept while the store was unavailable%s", written, dropped)
        self._held = self._dropped = 0

    def _sent(self, task: asyncio.Task[None]) -> None:
        self._sending = None
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("writing the counters kept for the store failed: %s", exc)

    async def close(self, execute: Execute, timeout_s: float = 5.0) -> None:
        """Write what is kept, if the store takes it within `timeout_s`; say what is lost."""
        if self._sending is not None:
            self._sending.cancel()
            await asyncio.gather(self._sending, return_exceptions=True)
        if self._writes:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._send_kept(execute), timeout_s)
        if self._writes:
            log.warning(
                "%d counters (what requests cost, the uses of grants) kept while the store was "
                "unavailable were never written: this process ends before it took writes again",
                len(self._writes),
            )
            self._writes.clear()
