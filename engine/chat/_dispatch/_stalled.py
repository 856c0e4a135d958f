"""Chats whose work the store refused, tried again until it records it.

When the store cannot record (PostgreSQL unreachable, a SQLite disk full or read-only: the
store says why, once), a chat's work item fails part-way. Nothing of it is lost: what was
recorded is consistent (each step is one transaction), and what was not is still in the inbox
as queued or taken. So the chat is treated as a restart would treat it, a little later: a
:class:`Recover` (finish a cut-off turn, deliver a stored answer) and an :class:`Inbound` (the
messages still queued), and again the item itself when running it twice is harmless (a
confirmation's answer, a background result: each is taken once by a guarded transition), are
put in its queue after a pause that grows while the store keeps
refusing (1 s, then up to 5 s: a local disk that has space again is noticed within seconds).
The refusal itself is not logged here: one line from the store says it for every chat.
"""

from __future__ import annotations

import logging

from engine import Backoff
from engine.loop import ConversationKey
from engine.work import ChatQueues, Decided, Inbound, JobDone, Recover, Tasks, WorkItem

log = logging.getLogger(__name__)

RETRY_MAX_S = 5.0


class Stalled:
    def __init__(self, queues: ChatQueues, tasks: Tasks) -> None:
        self.queues = queues
        self.tasks = tasks
        self._backoff: dict[ConversationKey, Backoff] = {}  # the chats whose work was refused
        self._waiting: set[ConversationKey] = set()  # a retry is scheduled
        self._again: dict[ConversationKey, list[WorkItem]] = {}  # items to put again

    def refused(self, key: ConversationKey, item: WorkItem) -> None:
        """The store refused the chat's work: try the chat again after a pause."""
        again = self._again.setdefault(key, [])
        if isinstance(item, Decided | JobDone) and item not in again:
            again.append(item)
        if key in self._waiting:
            return
        backoff = self._backoff.setdefault(key, Backoff(1.0, max_s=RETRY_MAX_S))
        self._waiting.add(key)
        self.tasks.spawn(self._retry(key, backoff), f"retry-{key}")

    def done(self, key: ConversationKey) -> None:
        """An item of the chat ran to its end: its pauses start short again."""
        if key not in self._waiting:
            self._backoff.pop(key, None)

    async def _retry(self, key: ConversationKey, backoff: Backoff) -> None:
        try:
            await backoff.sleep()
        finally:
            self._waiting.discard(key)
        self.queues.put(key, Recover())
        for item in self._again.pop(key, []):
            self.queues.put(key, item)
        self.queues.put(key, Inbound())
