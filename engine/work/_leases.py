"""Which chats this instance holds, when several instances share the store.

:class:`ChatQueues` asks :class:`ChatLeases` where each work item goes: queued here when this
instance holds the chat, else handed over as a signal to whoever holds (or claims) it. A chat
whose queue runs dry is released :data:`LINGER_S` later unless work came back meanwhile (a
conversation in full flow is not claimed and released again for each message: two database
writes each time).

A chat nobody holds is claimed by its *home* only: the live instance that rendezvous hashing
picks for the chat (:meth:`ChatLeases.home`), so one instance claims instead of all of them
racing for it (each losing claim was a database round trip: with four instances, three per
message). A new message is addressed to one instance (engine/work/_signals.py): the holder the
database names as it notifies, else the home; an instance told so claims the chat unless it
holds it, and sends the message on to the holder if that claim is lost (the chat changed hands
meanwhile). Every other signal is heard by every instance: the holder queues it, and when
nobody holds the chat the home named in it claims it. A sender that knows no live instances
yet, or an older relaybot's signal, names none: then every instance claims, the less busy ones
first. A home that died before its sender noticed leaves the chat to the sweep of unheld work
(engine/work/_cluster.py, every second). Claims and releases of one chat never overlap
(:class:`KeyedLocks`).
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import logging
from collections.abc import Awaitable, Callable, Iterable

from engine._clock import monotonic
from engine.loop import ConversationKey
from engine.store import ClusterStore
from engine.work._items import WorkItem
from engine.work._locks import KeyedLocks
from engine.work._queue import ChatQueues
from engine.work._signals import MAX_HOPS, Publisher, alone, encode
from tools.errors import StoreError

log = logging.getLogger("engine.work._cluster")

LINGER_S = 2.0  # a chat whose queue ran dry is let go this long after, unless work came back
_MAX_CLAIM_DELAY_S = 0.05  # a busy instance waits this long at most before claiming a chat
_ACQUIRE_POLL_S = 0.1  # /retry and /undo wait for the chat's holder to let it go


class ChatLeases:
    """The leases of :class:`ChatQueues` (``queues.leases``)."""

    def __init__(
        self,
        store: ClusterStore,
        queues: ChatQueues,
        spawn: Callable[[Awaitable[None], str], None],
        unreachable: Callable[[BaseException], None],
    ) -> None:
        self.store = store
        self.queues = queues
        self.publisher = Publisher(store, unreachable, self.came_back)  # run by the cluster
        self._spawn = spawn
        self._unreachable = unreachable
        self._held: set[ConversationKey] = set()
        # items waiting for a claim, each with its hops when addressed here (sent on if lost)
        self._claiming: dict[ConversationKey, list[tuple[WorkItem, int | None]]] = {}
        self._inflight: collections.Counter[ConversationKey] = collections.Counter()
        self._locks: KeyedLocks[ConversationKey] = KeyedLocks()
        self._lingering: dict[ConversationKey, asyncio.TimerHandle] = {}
        self.live: tuple[int, ...] = ()  # the live instances, as the last heartbeat found them
        self._fenced = 0  # how often this instance was fenced: a claim sent before is void
        queues.leases = self

    def take(self, chats: Iterable[tuple[str, str]]) -> None:
        """These chats are now held here (adopted, or claimed as orphans)."""
        for channel, chat_id in chats:
            self._held.add(ConversationKey(channel, chat_id))

    def clear(self) -> None:
        """This instance was fenced: it holds nothing any more (nor what a claim on its way
        wins: another instance is recovering the chat)."""
        self._fenced += 1
        self._held.clear()
        self._claiming.clear()
        self._inflight.clear()
        for timer in self._lingering.values():
            timer.cancel()
        self._lingering.clear()

    # -- ChatQueues' Leases ---------------------------------------------------------------

    def holds(self, key: ConversationKey) -> bool:
        # what this instance published for the chat and has not seen come back would run
        # after what it queues now: keep its order by sending this the same way
        return key in self._held and not self._inflight[key]

    def home(self, key: ConversationKey) -> int | None:
        """The live instance that claims the chat when nobody holds it (None: not known yet):
        the highest hash of (instance, chat), so a chat moves only when its home comes or goes."""
        if len(self.live) <= 1:
            return self.live[0] if self.live else None
        chat = f"{key.channel}\x00{key.chat_id}".encode()
        return max(
            self.live, key=lambda i: hashlib.blake2b(chat, digest_size=8, salt=_salt(i)).digest()
        )

    def hand_over(self, key: ConversationKey, item: WorkItem, hops: int = 0) -> bool:
        home = self.home(key)
        payload = encode(key, item, self.store.incarnation, home, hops)
        if payload is None:
            return False
        self._inflight[key] += 1
        self.publisher.put(payload, key, home, alone=alone(item))
        return True

    def released(self, key: ConversationKey) -> None:
        """The chat's queue ran dry: let it go in a while, unless work comes back first."""
        if key not in self._held:
            return
        if (timer := self._lingering.pop(key, None)) is not None:
            timer.cancel()
        loop = asyncio.get_running_loop()
        self._lingering[key] = loop.call_later(LINGER_S, self._let_go, key)

    def _let_go(self, key: ConversationKey) -> None:
        self._lingering.pop(key, None)
        if key not in self._held or self.queues.holding(key):
            return  # work came back: released again when it is done
        self._held.discard(key)
        self._spawn(self._release(key), "release")

    async def _release(self, key: ConversationKey) -> None:
        async with self._locks.hold(key):
            try:
                await self.store.release(key.channel, key.chat_id)
            except StoreError as exc:
                self._unreachable(exc)  # its row stays: only this instance can claim it again

    async def acquire(self, key: ConversationKey, timeout: float = 10.0) -> bool:
        """Hold the chat here (for work that waits for its reply here, /retry and /undo):
        waits, within `timeout`, for its holder to let it go."""
        deadline = monotonic() + timeout
        while not self.holds(key):
            if key not in self._held and key not in self._claiming:
                fenced = self._fenced
                async with self._locks.hold(key):
                    if await self.store.claim(key.channel, key.chat_id) and fenced == self._fenced:
                        self._held.add(key)
                        continue
            if monotonic() > deadline:
                return False
            await asyncio.sleep(_ACQUIRE_POLL_S)  # the holder lets it go when its work is done
        return True

    # -- chat signals ---------------------------------------------------------------------

    def came_back(self, key: ConversationKey) -> None:
        """A signal this instance published for the chat was delivered (to everyone, or to the
        one instance it was addressed to)."""
        if self._inflight[key]:
            self._inflight[key] -= 1

    def arrived(
        self, key: ConversationKey, item: WorkItem, to: int | None = None, hops: int | None = None
    ) -> None:
        """A work item for the chat: queued here if held, else claimed first by its home (`to`;
        None: by any). `hops` (how often it was sent on) is given for an item addressed to this
        instance alone: it claims the chat whatever its home, and sends the item on if it lost."""
        if key in self._held:
            self.queues.put(key, item, here=True)
        elif hops is None and to is not None and to != self.store.incarnation:
            return  # its holder has it too, or its home claims it
        elif key in self._claiming:
            self._claiming[key].append((item, hops))
        else:
            self._claiming[key] = [(item, hops)]
            contested = to is None and hops is None
            self._spawn(self._claim(key, contested=contested, fenced=self._fenced), "claim")

    async def _claim(self, key: ConversationKey, *, contested: bool, fenced: int) -> None:
        if contested:  # every instance claims it: let the idle ones win
            await asyncio.sleep(min(self.queues.busy * 0.002, _MAX_CLAIM_DELAY_S))
        try:
            async with self._locks.hold(key):
                won = key in self._held or await self.store.claim(key.channel, key.chat_id)
        except StoreError as exc:
            self._unreachable(exc)
            won = False  # the sweep finds the chat's work once the database is back
        if fenced != self._fenced:
            return  # fenced meanwhile: what it claimed is recovered elsewhere, as the rest
        items = self._claiming.pop(key, [])
        log.debug("claim of %s: %s (%d items)", key, "won" if won else "held elsewhere", len(items))
        if not won:  # its holder has these items too, but for those addressed here alone
            for item, hops in items:
                if hops is not None and hops < MAX_HOPS:
                    self.hand_over(key, item, hops + 1)
            return
        self._held.add(key)
        for item, _hops in items:
            self.queues.put(key, item, here=True)


def _salt(instance: int) -> bytes:
    return instance.to_bytes(8, "little", signed=True)
