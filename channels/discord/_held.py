"""Discord messages the store refused, held in memory and handed over again, in order.

Telegram keeps an update until it is confirmed; Discord's gateway keeps nothing: an event it
sent is gone once sent. So a message the store cannot record now (its disk full, its database
unreachable: :class:`tools.errors.StoreUnavailable`) is kept here and handed to the engine again
after a pause (1 s, growing to 5 s) until it is recorded. A chat with a message held keeps its
later ones behind it, so a chat's messages still reach the engine in the order they were sent.
What is held when the process ends is not lost: it was never settled (``_unstored``), so the
restart resumes the gateway session from before it and Discord sends it again. The store itself
says why it refuses, once, and this says once that messages wait.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Awaitable, Callable

from engine import Backoff, InboundMessage
from tools.errors import StoreUnavailable

log = logging.getLogger("channels.discord")

Hand = Callable[[InboundMessage], Awaitable[None]]


class Held:
    """`settled(message id)` is called once a held message is stored (or given up)."""

    def __init__(self, hand: Hand, settled: Callable[[str], None], *, max_s: float = 5.0) -> None:
        self._hand = hand
        self._settled = settled
        self._max_s = max_s
        self._chats: dict[str, collections.deque[InboundMessage]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._locks: dict[str, asyncio.Lock] = {}  # per chat, while a message is handed
        self._using: dict[str, int] = {}  # how many messages want each chat's lock

    @property
    def waiting(self) -> int:
        return sum(len(q) for q in self._chats.values())

    async def hand(self, msg: InboundMessage) -> bool:
        """Hand `msg` to the engine, or hold it (behind the chat's held ones) until it can;
        True when held. A chat's messages are handed one at a time, so that none overtakes one
        refused."""
        chat = msg.chat_id
        lock = self._locks.setdefault(chat, asyncio.Lock())
        self._using[chat] = self._using.get(chat, 0) + 1
        try:
            async with lock:
                queue = self._chats.get(chat)
                if queue is not None:
                    queue.append(msg)
                    return True
                try:
                    await self._hand(msg)
                except StoreUnavailable:
                    self._hold(msg)
                    return True
                return False
        finally:
            self._using[chat] -= 1
            if not self._using[chat]:
                del self._using[chat], self._locks[chat]

    def _hold(self, msg: InboundMessage) -> None:
        if not self._chats:
            log.warning(
                "Discord: messages are held in memory while the store cannot record them, "
                "and handed over again every few seconds"
            )
        self._chats[msg.chat_id] = collections.deque([msg])
        task = asyncio.create_task(self._retry(msg.chat_id), name="discord-held")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _retry(self, chat_id: str) -> None:
        queue = self._chats[chat_id]
        backoff = Backoff(1.0, max_s=self._max_s)
        while queue:
            await backoff.sleep()
            try:
                while queue:
                    await self._hand(queue[0])
                    self._settled(queue.popleft().message_id)
            except StoreUnavailable:
                continue
            except Exception:
                log.exception("Discord message %s could not be handed over", queue[0].message_id)
                self._settled(queue.popleft().message_id)
        del self._chats[chat_id]
        if not self._chats:
            log.info("Discord: the held messages are recorded")

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if (waiting := self.waiting) > 0:
            log.warning(
                "Discord: %d messages the store never took are left at stop; the restart has "
                "Discord send them again",
                waiting,
            )
        self._chats.clear()
