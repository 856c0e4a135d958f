# Left whole: one idea, which instance works on which chat and what happens when one dies.
"""Several instances on one store: which instance works on which chat, and what happens when one
dies. Used only with a store several processes can share (PostgreSQL, ``Store.cluster``); with
SQLite none of this runs.

Each instance joins the store as a live *incarnation* and renews its heartbeat every second
(engine/store/_pg_cluster.py keeps the rows). A chat's work items run only on the instance
holding the chat's lease, one at a time, so a chat's turns stay strictly ordered whichever
instance runs them:

- work for a chat that is not held here (a message, a press, a finished job, a scheduled run)
  is *handed over* (NOTIFY) to the chat's holder, else to its home, which claims it
  (engine/work/_leases.py); nothing polls, so a message reaches an idle instance at once;
- a chat whose queue runs dry is released (2 s later, unless more work comes);
- a dead instance (no heartbeat for ``lease_s``) is *adopted* by the first live instance that
  sees it: its chats and running jobs become the adopter's, which recovers them exactly as a
  restart recovers its own (``Dispatcher.recover``: stored answers delivered, cut-off turns
  finished, approved actions run once, started ones reported, jobs resumed or reported);
- every tick also claims chats with unfinished work that nobody held at the tick before either
  (a notification missed while the database was away), so nothing waits for a message that
  will not come;
- each part of a channel's receiving side (Telegram's polling, the Discord gateway or one of its
  shards) is held by one instance, which resumes what its previous holder left
  (engine/work/_receivers.py).

An instance that cannot renew its lease before it runs out (the database is unreachable, or
another instance found it dead) *fences* itself: it stops receiving and drops all chat work
without recording anything, since another instance is about to recover it; it then keeps trying
to reach the database (logging once a minute), and joins again as a new incarnation.

What the instances tell each other, and in which order: engine/work/_signals.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from engine._backoff import Backoff
from engine._channel import Channel
from engine._clock import monotonic
from engine.loop import ConversationKey
from engine.store import Adoption, ClusterStore
from engine.work._leases import ChatLeases
from engine.work._queue import ChatQueues
from engine.work._receivers import WANT, Receivers
from engine.work._signals import (
    FORGOT,
    IDS_PER_SIGNAL,
    JOINED,
    SETTINGS,
    STOP,
    decode,
)
from engine.work._signals import signal as chat_signal
from tools.errors import StoreError

log = logging.getLogger(__name__)

TICK_S = 1.0  # heartbeat, adoption and receiving checks
_MARGIN_S = 1.0  # stop working this long before this instance's lease could run out
_REPORT_EVERY_S = 60.0  # an unreachable database is logged once a minute
_FLUSH_S = 2.0  # a stopping instance publishes what it handed over for this long at most


@dataclass(frozen=True, slots=True)
class InstanceSettings:
    name: str  # `[instance] id`
    lease_s: float = 5.0  # a dead instance's chats move after this long


class ClusterEvents(Protocol):
    """What the cluster asks of the engine it runs in (given when it joins)."""

    async def recover(self, taken: Adoption | None = None) -> None:
        """Queue what the chats and jobs just taken over left, as a restart would."""

    async def settings_changed(self) -> None:
        """Another instance changed a chat's /settings: read them again."""

    async def abandon_jobs(self) -> None:
        """This instance was fenced: stop its jobs without recording anything."""

    async def forgot(self, job_ids: list[str]) -> None:
        """A user was forgotten on another instance: stop their jobs here, drop what is kept
        in memory about them."""


class Cluster:
    """The instance's life on a shared store; its chats' leases are :attr:`leases`."""

    def __init__(
        self,
        store: ClusterStore,
        queues: ChatQueues,
        channels: Mapping[str, Channel],
        settings: InstanceSettings,
    ) -> None:
        self.store = store
        self.queues = queues
        self.channels = channels
        self.settings = settings
        self._events: ClusterEvents | None = None  # given by join
        self._publishing: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.receivers = Receivers(store, channels, settings.lease_s)
        self._renewed_at = 0.0  # monotonic time the last successful heartbeat was sent
        self._unreachable_since: float | None = None
        self._reported_at = 0.0
        self._fenced = False
        self._unheld: frozenset[tuple[str, str]] = frozenset()  # as the last sweep found them
        self.leases = ChatLeases(store, queues, self._spawn, self._unreachable)
        store.on_signal(self._signal)
        store.on_addressed(lambda payload: self._signal(payload, addressed=True))
        store.on_reconnect(self._sweep)

    @property
    def incarnation(self) -> int | None:
        return self.store.incarnation

    def may_send(self) -> bool:
        """False once this instance's lease may have run out: another instance may then be
        recovering its chats, so it must not send anything more for them."""
        deadline = self._renewed_at + self.settings.lease_s - _MARGIN_S
        return not self._fenced and monotonic() < deadline

    # -- life -----------------------------------------------------------------------------

    async def join(self, events: ClusterEvents) -> None:
        """Join as a live instance and take what nobody holds, before the queues open."""
        self._events = events
        sent = monotonic()
        number = await self.store.join(self.settings.name, self.settings.lease_s)
        self._renewed_at = sent
        self.leases.live = await self.store.live()
        self._fenced = False
        self.receivers.joined(sent)
        if self._publishing is None:
            self._publishing = asyncio.create_task(
                self.leases.publisher.run(), name="cluster-publish"
            )
            self._tasks.add(self._publishing)
        await self.store.listen()
        await self.store.publish(json.dumps({"k": JOINED, "o": number}))  # chats it is home to
        log.info("joined as instance %s (#%d)", self.settings.name, number)
        await self._sweep()

    async def run(self) -> None:
        """Heartbeat, adoption and receiving, every tick, until cancelled."""
        while True:
            await asyncio.sleep(TICK_S)  # the heartbeat's period
            try:
                await self._tick()
            except StoreError as exc:
                self._unreachable(exc)
            except Exception:
                log.exception("the cluster tick failed")
            if monotonic() > self._renewed_at + self.settings.lease_s - _MARGIN_S:
                await self._fence("its lease could not be renewed in time")
                await self._rejoin()

    async def stop_receiving(self) -> None:
        """Stopping: let another instance receive at once (this one finishes its turns)."""
        await self.receivers.let_go_all()

    async def leave(self) -> None:
        """A clean stop: what is still held is taken over at once."""
        await self.stop_receiving()
        await self.leases.publisher.flush(_FLUSH_S)  # what was handed over goes out first
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if not self._fenced:
            with contextlib.suppress(StoreError):
                await self.store.leave()

    async def _tick(self) -> None:
        sent = monotonic()
        timeout = max(0.1, self._renewed_at + self.settings.lease_s - _MARGIN_S - sent)
        alive = await self.store.heartbeat(timeout)  # never cut off mid-statement
        if not alive:
            await self._fence("another instance found it dead and took over its chats")
            await self._rejoin()
            return
        self._renewed_at = sent
        self.leases.live = await self.store.live()
        if self._unreachable_since is not None:
            log.warning(
                "the database is reachable again (after %.0f s)",
                monotonic() - self._unreachable_since,
            )
            self._unreachable_since = None
        while (adopted := await self.store.adopt(list(self.channels))) is not None:
            log.log(
                logging.WARNING if adopted.chats or adopted.jobs else logging.INFO,
                "instance %s stopped answering: took over its %d chats and %d jobs",
                adopted.instance
                if adopted.instance != self.settings.name
                else f"{adopted.instance} (this one, before its lease ran out)",
                len(adopted.chats),
                len(adopted.jobs),
            )
            await self._take(adopted)
        await self._sweep()
        await self.receivers.tick(self.incarnation)

    async def _sweep(self) -> None:
        """Claim the chats with unfinished work that nobody held at the last sweep either (one
        nobody holds now may be on its way to its home), and jobs nobody runs."""
        if self._fenced:
            return  # joining again sweeps
        seen, self._unheld = self._unheld, await self.store.unheld(list(self.channels))
        orphans = await self.store.orphans(seen & self._unheld)
        if orphans.chats or orphans.jobs:
            await self._take(orphans)

    async def _take(self, adoption: Adoption) -> None:
        self.leases.take(adoption.chats)
        assert self._events is not None  # joined
        await self._events.recover(adoption)

    def _unreachable(self, exc: BaseException) -> None:
        now = monotonic()
        if self._unreachable_since is None:
            self._unreachable_since = now
        if now - self._reported_at >= _REPORT_EVERY_S:
            self._reported_at = now
            log.error(
                "the database is unreachable (for %.0f s; retrying): %s",
                now - self._unreachable_since,
                exc,
            )

    async def _fence(self, why: str) -> None:
        """Stop receiving and drop every chat's work, recording nothing: another instance
        recovers them as a restart would."""
        if self._fenced:
            return
        self._fenced = True
        log.error("this instance stops working on its chats: %s", why)
        await self.receivers.let_go_all(record=False)
        self.leases.clear()
        await self.queues.abandon()
        assert self._events is not None  # joined
        await self._events.abandon_jobs()  # the instance that adopts this one runs them again

    async def _rejoin(self) -> None:
        """Reach the database again (backing off, logging once a minute) and join anew."""
        backoff = Backoff(0.5, max_s=10)
        while True:
            try:
                assert self._events is not None  # joined before
                await self.join(self._events)
                return
            except StoreError as exc:
                self._unreachable(exc)
            await backoff.sleep()

    async def stop(self, key: ConversationKey) -> bool:
        """/stop and /reset: stop the running item wherever the chat is held."""
        if self.queues.stop(key):
            return True
        if self.leases.holds(key):  # held here, and nothing runs: nothing to stop
            return False
        if await self.store.holder(key.channel, key.chat_id) is None:
            return False
        await self.store.publish(chat_signal(STOP, key, self.incarnation))
        return True

    async def settings_changed(self) -> None:
        """A chat's /settings changed here: every other instance reads them again."""
        await self.store.publish(json.dumps({"k": SETTINGS, "o": self.incarnation}))

    async def forgot(self, job_ids: Sequence[str]) -> None:
        """A user was forgotten here: every other instance stops those jobs and lets go of what
        it keeps in memory about them."""
        ids = list(job_ids)
        for start in range(0, max(len(ids), 1), IDS_PER_SIGNAL):
            chunk = ids[start : start + IDS_PER_SIGNAL]
            await self.store.publish(
                json.dumps({"k": FORGOT, "o": self.incarnation, "jobs": chunk})
            )

    # -- signals --------------------------------------------------------------------------

    def _signal(self, payload: str, *, addressed: bool = False) -> None:
        try:
            data = json.loads(payload)
            kind = data["k"]
        except (ValueError, KeyError, TypeError):
            log.warning("ignored a malformed signal")
            return
        if self._events is None:
            return  # signals are listened to once joined
        if kind == SETTINGS:
            if data.get("o") != self.incarnation:
                self._spawn(self._events.settings_changed(), "reload-settings")
            return
        if kind == WANT:
            if data.get("o") != self.incarnation and not self._fenced:
                lease = str(data.get("r"))
                if self.receivers.asked_for(lease):
                    self._spawn(self.receivers.let_go(lease), "hand-back")
            return
        if kind == JOINED:
            if data.get("o") != self.incarnation:
                self._spawn(self._learn_live(), "live")
            return
        if kind == FORGOT:
            if data.get("o") != self.incarnation:
                self._spawn(self._events.forgot([str(j) for j in data.get("jobs", [])]), "forgot")
            return
        key = ConversationKey(data["c"], data["i"])
        if data.get("o") == self.incarnation:
            self.leases.came_back(key)
        if self._fenced or key.channel not in self.channels:
            return
        if kind == STOP:
            self.queues.stop(key)
            return
        item = decode(kind, data)
        if item is None:
            return
        to, hops = data.get("t"), data.get("h")
        hops = (hops if isinstance(hops, int) else 0) if addressed else None
        self.leases.arrived(key, item, to if isinstance(to, int) else None, hops)

    async def _learn_live(self) -> None:
        try:
            self.leases.live = await self.store.live()
        except StoreError as exc:
            self._unreachable(exc)

    def _spawn(self, work: Awaitable[None], name: str) -> None:
        task = asyncio.ensure_future(work)
        task.set_name(name)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("%s failed", task.get_name(), exc_info=exc)
