"""Which chats this instance holds, when several instances share the store.

:class:`ChatQueues` asks :class:`ChatLeases` where each work item goes: queued here when this
instance holds the chat, else handed over as a signal to whoever holds (or claims) it. A chat
whose queue runs dry is released, so the next burst goes to whoever is least busy. A chat
signal that arrives for a chat nobody holds is claimed, the less busy instances first; the
winner queues it, the others drop it (its holder has it too). Claims and releases of one chat
never overlap (:class:`KeyedLocks`).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Awaitable, Callable, Iterable

from engine._store import ClusterStore
from engine.loop import ConversationKey
from engine.work._locks import KeyedLocks
from engine.work._queue import ChatQueues, WorkItem
from engine.work._signals import Publisher, encode
from tools import StoreError

log = logging.getLogger("engine.work._cluster")

_MAX_CLAIM_DELAY_S = 0.05  # a busy instance waits this long at most before claiming a chat
_ACQUIRE_POLL_S = 0.1  # /retry and /undo wait for the chat's holder to let it go


class ChatLeases:
    """The leases of :class:`ChatQueues` (``queues.leases``)."""

    def __init__(
        self,
        store: ClusterStore,
        queues: ChatQueues,
        publisher: Publisher,
        spawn: Callable[[Awaitable[None], str], None],
        unreachable: Callable[[BaseException], None],
    ) -> None:
        self.store = store
        self.queues = queues
        self._publisher = publisher
        self._spawn = spawn
        self._unreachable = unreachable
        self._held: set[ConversationKey] = set()
        self._claiming: dict[ConversationKey, list[WorkItem]] = {}
        self._inflight: collections.Counter[ConversationKey] = collections.Counter()
        self._locks: KeyedLocks[ConversationKey] = KeyedLocks()
        queues.leases = self

    def take(self, chats: Iterable[tuple[str, str]]) -> None:
        """These chats are now held here (adopted, or claimed as orphans)."""
        for channel, chat_id in chats:
            self._held.add(ConversationKey(channel, chat_id))

    def clear(self) -> None:
        """This instance was fenced: it holds nothing any more."""
        self._held.clear()
        self._claiming.clear()
        self._inflight.clear()

    # -- ChatQueues' Leases ---------------------------------------------------------------

    def holds(self, key: ConversationKey) -> bool:
        # what this instance published for the chat and has not seen come back would run
        # after what it queues now: keep its order by sending this the same way
        return key in self._held and not self._inflight[key]

    def hand_over(self, key: ConversationKey, item: WorkItem) -> bool:
        payload = encode(key, item, self.store.incarnation)
        if payload is None:
            return False
        self._inflight[key] += 1
        self._publisher.put(payload)
        return True

    def released(self, key: ConversationKey) -> None:
        if key not in self._held:
            return
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
        deadline = time.monotonic() + timeout
        while not self.holds(key):
            if key not in self._held and key not in self._claiming:
                async with self._locks.hold(key):
                    if await self.store.claim(key.channel, key.chat_id):
                        self._held.add(key)
                        continue
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(_ACQUIRE_POLL_S)  # the holder lets it go when its work is done
        return True

    # -- chat signals ---------------------------------------------------------------------

    def came_back(self, key: ConversationKey) -> None:
        """A signal this instance published for the chat was delivered (to everyone)."""
        if self._inflight[key]:
            self._inflight[key] -= 1

    def arrived(self, key: ConversationKey, item: WorkItem) -> None:
        """A work item for the chat: queued here if held, else claimed first."""
        if key in self._held:
            self.queues.put(key, item, here=True)
        elif key in self._claiming:
            self._claiming[key].append(item)
        else:
            self._claiming[key] = [item]
            self._spawn(self._claim(key), "claim")

    async def _claim(self, key: ConversationKey) -> None:
        await asyncio.sleep(min(self.queues.busy * 0.002, _MAX_CLAIM_DELAY_S))  # let idle win
        try:
            async with self._locks.hold(key):
                won = key in self._held or await self.store.claim(key.channel, key.chat_id)
        except StoreError as exc:
            self._unreachable(exc)
            won = False  # the sweep finds the chat's work once the database is back
        items = self._claiming.pop(key, [])
        log.debug("claim of %s: %s (%d items)", key, "won" if won else "held elsewhere", len(items))
        if not won:
            return  # its holder has these items too
        self._held.add(key)
        for item in items:
            self.queues.put(key, item, here=True)
