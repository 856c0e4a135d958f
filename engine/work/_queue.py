"""The per-chat queue: everything that touches a conversation, in order, one item at a time.

Whatever writes a chat's history travels as a typed work item (engine/work/_items.py) through
that chat's queue: new messages, what a restart left unsettled, a confirmation's answer, a
background result, a notice. Chats run concurrently; within a chat items run strictly in order,
so the history is always written in order and recovery is part of that order instead of racing
it.

Items may be queued before :meth:`ChatQueues.open` (at start-up, while the store is read and
before the channels deliver): workers start only when the queues open, so what a restart queued
for a chat runs before any message that arrives afterwards.

With several instances on one store, a chat's items run where the chat is held
(engine/work/_cluster.py, the :class:`Leases`): an item for a chat held elsewhere (or by nobody) is
handed over instead of queued, and a chat whose queue runs dry is let go. Without leases (one
process, SQLite) every chat is this process's and nothing of that costs anything.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from engine.loop import ConversationKey
from engine.work._items import WorkItem

log = logging.getLogger(__name__)


Handler = Callable[[ConversationKey, WorkItem], Coroutine[Any, Any, None]]
Stopped = Callable[[ConversationKey, WorkItem], Awaitable[None]]
_I = TypeVar("_I", bound=WorkItem)


class Leases(Protocol):
    """Which chats this process may work on (engine/work/_cluster.py)."""

    def holds(self, key: ConversationKey) -> bool:
        """True when this process holds the chat (its items are queued here)."""
        ...

    def hand_over(self, key: ConversationKey, item: WorkItem) -> bool:
        """Send `item` to whichever instance holds (or claims) the chat; False when it cannot
        travel (it carries a reply waiting here)."""
        ...

    def released(self, key: ConversationKey) -> None:
        """The chat's queue ran dry here: let it go."""
        ...


@dataclass(slots=True)
class _Chat:
    key: ConversationKey
    items: collections.deque[WorkItem] = field(default_factory=collections.deque)
    worker: asyncio.Task[None] | None = None
    turn: asyncio.Task[None] | None = None
    idle: asyncio.Event = field(default_factory=asyncio.Event)
    stopped: asyncio.Future[None] | None = None  # done once what /stop cut off is recorded


class ChatQueues:
    """Items are queued from the start; once opened, `handle(key, item)` runs each and
    `on_stopped(key, item)` runs when /stop cancelled one."""

    def __init__(self) -> None:
        self._handle: Handler | None = None
        self._on_stopped: Stopped | None = None
        self.leases: Leases | None = None  # set when several instances share the store
        self._chats: dict[ConversationKey, _Chat] = {}
        # the workers of abandoned chats, until their cut-off item has wound down: a chat's
        # next worker waits for its abandoned one (two items of one chat never run at once)
        self._winding: dict[ConversationKey, asyncio.Task[None]] = {}
        self._open = False
        self._closing = False

    @property
    def closing(self) -> bool:
        """Shutting down: nothing new is taken."""
        return self._closing

    @property
    def busy(self) -> int:
        """Chats with an item running now."""
        return sum(1 for c in self._chats.values() if c.turn is not None)

    def depths(self) -> list[int]:
        """Items waiting per chat (for metrics)."""
        return [len(c.items) for c in self._chats.values()]

    def put(self, key: ConversationKey, item: WorkItem, *, here: bool = False) -> bool:
        """Queue `item` for the chat (or hand it to the instance holding the chat, unless
        `here`: the leases know it is held here); False when shutting down (nothing is taken
        any more)."""
        if self._closing:
            return False
        if self.leases is not None and not here and not self.leases.holds(key):
            return self.leases.hand_over(key, item)
        chat = self._chats.get(key)
        if chat is None:
            chat = self._chats[key] = _Chat(key)
        chat.items.append(item)
        if self._open and chat.worker is None:
            chat.worker = asyncio.create_task(self._work(chat), name=f"chat-{key}")
        return True

    def take(self, key: ConversationKey, kind: type[_I]) -> list[_I]:
        """Remove the chat's queued items of `kind` (not the one running) and return them, in
        order: the running item does them first (engine/chat/_confirmations/_decided.py)."""
        chat = self._chats.get(key)
        if chat is None or not any(isinstance(i, kind) for i in chat.items):
            return []
        taken: list[_I] = [i for i in chat.items if isinstance(i, kind)]
        chat.items = collections.deque(i for i in chat.items if not isinstance(i, kind))
        return taken

    def open(self, handle: Handler, on_stopped: Stopped) -> None:
        """Start the workers (of the chats queued so far, and of every chat from now on)."""
        self._handle = handle
        self._on_stopped = on_stopped
        self._open = True
        for chat in list(self._chats.values()):
            if chat.items and chat.worker is None:
                chat.worker = asyncio.create_task(self._work(chat), name=f"chat-{chat.key}")

    def stop(self, key: ConversationKey) -> bool:
        """Cancel the item running in the chat; False if nothing runs."""
        chat = self._chats.get(key)
        if chat is None or chat.turn is None:
            return False
        chat.turn.cancel()
        if chat.stopped is None:
            chat.stopped = asyncio.get_running_loop().create_future()
        return True

    async def stopped(self, key: ConversationKey, timeout_s: float) -> None:
        """Wait (at most `timeout_s`) until what :meth:`stop` cut off in the chat is recorded
        (``on_stopped`` ran): a "Stopped." said after it holds across a crash."""
        chat = self._chats.get(key)
        if chat is not None and chat.stopped is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(chat.stopped), timeout_s)

    async def wait_idle(self, key: ConversationKey) -> None:
        """Wait until the chat has nothing queued or running."""
        chat = self._chats.get(key)
        if chat is not None:
            await chat.idle.wait()

    async def _work(self, chat: _Chat) -> None:
        try:
            if (abandoned := self._winding.get(chat.key)) is not None:
                await asyncio.wait([abandoned])
            while chat.items:
                item = chat.items.popleft()
                assert self._handle is not None  # workers start once opened
                chat.turn = asyncio.create_task(self._handle(chat.key, item))
                try:
                    await chat.turn
                except asyncio.CancelledError:
                    current = asyncio.current_task()
                    if current is not None and current.cancelling():
                        raise  # we are being shut down
                    await self._after_stop(chat.key, item)
                except Exception:
                    log.exception("work in %s failed (%s)", chat.key, type(item).__name__)
                finally:
                    chat.turn = None
                    _settle(chat)
        finally:
            _settle(chat)
            chat.worker = None
            # an abandoned chat is not in the map any more: the chat there is a newer one's
            if not chat.items and self._chats.get(chat.key) is chat:
                del self._chats[chat.key]
                chat.idle.set()
                if self.leases is not None and not self._closing:
                    self.leases.released(chat.key)

    async def _after_stop(self, key: ConversationKey, item: WorkItem) -> None:
        # whatever fails here, the chat's next items still run (a failure escaping the worker
        # would leave them waiting for the next message)
        try:
            if self._on_stopped is not None:
                await self._on_stopped(key, item)
        except Exception:
            log.exception("closing what /stop cut off in %s failed", key)

    def holding(self, key: ConversationKey) -> bool:
        """True while the chat has items queued or running here."""
        return key in self._chats

    async def abandon(self) -> None:
        """Drop every chat's work at once, recording nothing (this process lost its leases:
        another instance recovers these chats as a restart would)."""
        chats = list(self._chats.values())
        self._chats.clear()
        for chat in chats:
            chat.items.clear()
            for task in (chat.turn, chat.worker):
                if task is not None:
                    task.cancel()
            chat.idle.set()
            if chat.worker is not None:
                self._wind_down(chat.key, chat.worker)
        await asyncio.gather(
            *(c.worker for c in chats if c.worker is not None), return_exceptions=True
        )

    def _wind_down(self, key: ConversationKey, worker: asyncio.Task[None]) -> None:
        self._winding[key] = worker

        def wound_down(_task: asyncio.Task[None]) -> None:
            if self._winding.get(key) is worker:
                del self._winding[key]

        worker.add_done_callback(wound_down)

    async def aclose(self, grace_s: float) -> list[ConversationKey]:
        """Let running items finish (bounded), then cancel; returns the chats cut off."""
        self._closing = True
        workers = [c.worker for c in self._chats.values() if c.worker is not None]
        if workers:
            await asyncio.wait(workers, timeout=grace_s)
        cut = [c.key for c in self._chats.values() if c.worker and not c.worker.done()]
        for chat in list(self._chats.values()):
            for task in (chat.turn, chat.worker):
                if task is not None:
                    task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        return cut


def _settle(chat: _Chat) -> None:
    """The item /stop cut off is settled (or ended by itself): who waits for it goes on."""
    if chat.stopped is not None:
        if not chat.stopped.done():
            chat.stopped.set_result(None)
        chat.stopped = None
