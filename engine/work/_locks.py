"""One lock per key (a chat), kept only while someone holds or waits for it.

A plain ``dict[key, asyncio.Lock]`` grows with every chat ever seen, and pruning it by
``lock.locked()`` is wrong: ``Lock.release`` clears that flag before the woken waiter runs, so
a pruned lock can be replaced by a fresh one while the old one's waiter proceeds, and two tasks
run the same chat's critical section at once. Counting the users of each lock instead drops a
lock exactly when nobody can still enter it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


@dataclass(slots=True)
class _Entry:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0  # holding or waiting


class KeyedLocks(Generic[K]):
    """``async with locks.hold(key):`` runs one holder per key at a time."""

    def __init__(self) -> None:
        self._entries: dict[K, _Entry] = {}

    def __len__(self) -> int:
        """Keys whose lock is held or waited for now."""
        return len(self._entries)

    @contextlib.asynccontextmanager
    async def hold(self, key: K) -> AsyncIterator[None]:
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = _Entry()
        entry.users += 1
        try:
            async with entry.lock:
                yield
        finally:
            entry.users -= 1
            if entry.users == 0:
                del self._entries[key]
