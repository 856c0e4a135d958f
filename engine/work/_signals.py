"""What instances sharing a store tell each other, and the order they tell it in.

A signal is a small JSON object published through the store (PostgreSQL's NOTIFY):
``{"k": kind, "c": channel, "i": chat id, "o": origin incarnation, ...}``. Work items travel
this way to the instance holding their chat (:func:`encode`, :func:`decode`); a few kinds are
about the whole instance (a stop, changed settings, a forgotten user). The :class:`Publisher`
sends handed-over items in the order they were handed over (those handed over meanwhile in one
statement), waiting out a database that is away rather than reordering or dropping them. A
new message (:class:`Inbound`: most of the traffic) is addressed to one instance, the chat's
holder or home, on its own channel; every other kind is told to every instance, as each may
have to act on it.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass

from engine._backoff import Backoff
from engine.loop import ConversationKey
from engine.store import ClusterStore
from engine.work._items import Decided, Inbound, JobDone, Notice, Recover, ScheduledRun, WorkItem
from tools.errors import StoreError

log = logging.getLogger("engine.work._cluster")

STOP = "stop"
SETTINGS = "settings"
FORGOT = "forgot"
JOINED = "joined"  # a new instance: the others learn the live instances again
IDS_PER_SIGNAL = 100  # job ids per notification (PostgreSQL caps a payload at 8000 bytes)
_RETRY_S = 0.5  # the database is away: publish again after this long, keeping the order
_RESTART_MAX_S = 30.0  # publishing that failed otherwise starts again after at most this long
BATCH = 200  # chat signals published in one statement at most
MAX_HOPS = 3  # an addressed item whose instance lost the chat is sent on at most this often


def signal(kind: str, key: ConversationKey, origin: int | None, **extra: object) -> str:
    return json.dumps({"k": kind, "c": key.channel, "i": key.chat_id, "o": origin, **extra})


def encode(
    key: ConversationKey, item: WorkItem, origin: int | None, to: int | None = None, hops: int = 0
) -> str | None:
    """The signal that carries `item` to the chat's holder, or, when nobody holds the chat, to
    instance `to` (its home: the only one to claim it; None: any, the least busy first);
    None when it cannot travel. `hops`: how often an addressed item was sent on."""
    match item:
        case Inbound():
            return signal("inbound", key, origin, t=to, h=hops)
        case Recover():
            return signal("recover", key, origin, t=to)
        case Decided(confirmation_id):
            return signal("decided", key, origin, id=confirmation_id, t=to)
        case JobDone(job_id):
            return signal("job", key, origin, id=job_id, t=to)
        case Notice(text, reply_to):
            return signal("notice", key, origin, text=text, reply_to=reply_to, t=to)
        case ScheduledRun(schedule_id, due):
            return signal("scheduled", key, origin, id=schedule_id, due=due, t=to)
    return None  # a Rewind waits for its reply here: it cannot travel


def decode(kind: str, data: dict[str, object]) -> WorkItem | None:
    """The work item a chat signal carries; None (logged) for one this version cannot read."""
    try:
        match kind:
            case "inbound":
                return Inbound()
            case "recover":
                return Recover()
            case "decided":
                return Decided(str(data["id"]))
            case "job":
                return JobDone(str(data["id"]))
            case "notice":
                reply_to = data.get("reply_to")
                return Notice(str(data["text"]), str(reply_to) if reply_to else None)
            case "scheduled":
                return ScheduledRun(int(str(data["id"])), float(str(data["due"])))
    except (KeyError, ValueError):
        pass
    log.warning("ignored a signal of kind %r", kind)
    return None


def alone(item: WorkItem) -> bool:
    """Whether `item` goes to one instance (its chat's holder or home) rather than to all."""
    return isinstance(item, Inbound)


@dataclass(frozen=True, slots=True)
class Outgoing:
    """A chat signal to publish: to the holder of `key` (else instance `home`) alone, or to
    every instance."""

    payload: str
    key: ConversationKey
    home: int | None
    alone: bool


class Publisher:
    """Publishes chat signals in the order they were put, those put meanwhile together in one
    statement, retrying while the database is away. `told_another(key)` is called for a signal
    that went to another instance alone (it will not come back here), and for a new message
    whose signal was already on its way (the same one again would say nothing new)."""

    def __init__(
        self,
        store: ClusterStore,
        unreachable: Callable[[BaseException], None],
        told_another: Callable[[ConversationKey], None],
    ) -> None:
        self._store = store
        self._unreachable = unreachable
        self._told_another = told_another
        self._outbox: collections.deque[Outgoing] = collections.deque()
        self._put = asyncio.Event()  # something was put since the outbox ran dry
        self._sent = asyncio.Event()  # everything put was published
        self._sent.set()

    def put(self, payload: str, key: ConversationKey, home: int | None, *, alone: bool) -> None:
        self._outbox.append(Outgoing(payload, key, home, alone))
        self._put.set()
        self._sent.clear()

    def _batch(self) -> list[Outgoing]:
        """The next signals in the outbox, up to one already among them (PostgreSQL would
        deliver two equal ones of a transaction once), less repeated new messages (told at
        once: they would say nothing new)."""
        batch: list[Outgoing] = []
        payloads: set[str] = set()
        while self._outbox and len(batch) < BATCH:
            item = self._outbox[0]
            if item.payload in payloads and not item.alone:
                break  # the next statement's
            self._outbox.popleft()
            if item.payload in payloads:
                self._told_another(item.key)
                continue
            payloads.add(item.payload)
            batch.append(item)
        return batch

    async def _send(self, batch: list[Outgoing]) -> None:
        told = await self._store.hand_over(
            [(o.key.channel, o.key.chat_id, o.home, o.alone, o.payload) for o in batch]
        )
        for item, instance in zip(batch, told, strict=True):
            if instance is not None and instance != self._store.incarnation:
                self._told_another(item.key)

    async def flush(self, timeout_s: float) -> None:
        """Wait (at most `timeout_s`) until everything put so far is published."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._sent.wait(), timeout_s)

    async def run(self) -> None:
        """Publish until cancelled. A failure that is not the database being away (a signal
        the server refuses: a payload too long for NOTIFY, say) is logged, that one signal is
        dropped (what it carried is still in the tables: the sweep finds the chat's work), and
        publishing starts again after a pause that grows while failures repeat."""
        backoff = Backoff(_RETRY_S, max_s=_RESTART_MAX_S)
        while True:
            try:
                await self._run(backoff)
            except Exception:
                log.exception(
                    "publishing a signal to the instances failed; it is dropped, and publishing "
                    "starts again in %.1f s",
                    backoff.upcoming_s,
                )
                await backoff.sleep()

    async def _run(self, backoff: Backoff) -> None:
        while True:
            if not self._outbox:
                self._sent.set()
                self._put.clear()
                await self._put.wait()
                continue
            batch = self._batch()
            try:
                await self._publish(batch)
            except Exception:
                if len(batch) == 1:
                    self._told_another(batch[0].key)  # it will not come back here
                    raise
                # one signal of the statement was refused: send them one by one
                self._outbox.extendleft(reversed(batch))
                await self._publish_alone(len(batch))
            backoff.reset()

    async def _publish_alone(self, count: int) -> None:
        for _ in range(count):
            item = self._outbox.popleft()
            try:
                await self._publish([item])
            except Exception:
                self._told_another(item.key)
                raise

    async def _publish(self, batch: list[Outgoing]) -> None:
        """Send `batch`, again and again while the database is away (keeping the order)."""
        while True:
            try:
                await self._send(batch)
                return
            except StoreError as exc:
                self._unreachable(exc)
                await asyncio.sleep(_RETRY_S)
