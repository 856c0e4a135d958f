"""Housekeeping: what keeps a daemon that runs for months from growing without bound.

One task, woken by a periodic timer every few seconds:

- the newest error of each channel goes to the store, for `relaybot status`
  (engine/metrics.py keeps them until then);
- when no chat has work running, the store gives space back (SQLite: the WAL is checkpointed
  and truncated; under steady load SQLite's own checkpoints keep it bounded, see
  engine/store/_sqlite_db.py);
- every `prune_every_s` (a tenth of the shortest retention, between 10 s and an hour) settled
  rows older than `settled_days` are deleted (answered inbox rows, sent deliveries, finished jobs
  and scheduled runs, decided confirmations), and with `keep_days` each conversation's history
  older than that (the store drops what it keeps in memory of them).

With PostgreSQL there is no WAL of relaybot's own (the server checkpoints its log); instances
sharing the store each prune, which is harmless (a row is deleted once). While the store cannot
be written (a PostgreSQL server away, a SQLite disk full or read-only) a tick is skipped quietly:
the store itself says why, once. Any other failure is logged once, not at every tick, until a
tick succeeds again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from engine import metrics
from engine._clock import monotonic, wall
from engine.chat._settings._sections import DAY_S, Retention
from engine.store import Pruned, Store
from tools.errors import StoreUnavailable

log = logging.getLogger(__name__)


class Housekeeping:
    """`busy()` says how many chats have work running (idle: 0)."""

    def __init__(
        self,
        store: Store,
        retention: Callable[[], Retention],
        busy: Callable[[], int],
        *,
        tick_s: float = 5.0,
    ) -> None:
        self.store = store
        self.retention = retention  # in force, read at each tick (a reload changes it)
        self.busy = busy
        self.tick_s = tick_s
        self._pruned_at: float | None = None  # None: the first tick prunes

    async def run(self) -> None:
        failing: str | None = None  # the failure reported already (once, not every tick)
        while True:
            await asyncio.sleep(self.tick_s)  # a periodic timer
            try:
                await self.tick()
            except StoreUnavailable:
                continue  # the store says why, once: next time
            except Exception as exc:
                if failing != (why := f"{type(exc).__name__}: {exc}"):
                    log.exception("housekeeping failed; trying again every %g s", self.tick_s)
                failing = why
                continue
            if failing is not None:
                log.info("housekeeping works again")
            failing = None

    async def tick(self) -> None:
        await self.flush()
        now = monotonic()
        last = self._pruned_at
        if last is None or now - last >= self.retention().prune_every_s:
            self._pruned_at = now
            await self.prune()
        if self.busy() == 0:
            await self.store.ops.compact()

    async def flush(self) -> None:
        """Store the errors noted since the last flush."""
        await self.store.ops.record_errors(metrics.take_errors())

    async def prune(self) -> Pruned:
        r = self.retention()
        now = wall()
        keep = now - r.keep_days * DAY_S if r.keep_days is not None else None
        pruned = await self.store.ops.prune(now - r.settled_days * DAY_S, keep)
        if pruned.total:
            log.info(
                "pruned %d settled rows and %d history messages",
                pruned.total - pruned.messages,
                pruned.messages,
            )
        return pruned
