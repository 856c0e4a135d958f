"""Memory, for every backend: short facts about a user (or a group) that outlive conversations.

An owner is "<channel>:<user id>" for a person (the same person on another platform is another
owner) and "<channel>:chat:<chat id>" for a group's own memory. Items are ordered most recently
used first: an item is used when it is saved (again) or found by a search, never merely by being
put into a prompt, so a turn writes nothing. Saving a text the owner already has (ignoring case)
touches that item instead of adding a copy.

A search is literal and ignores case: the query's ``%``, ``_`` and ``\\`` are escaped in a LIKE
pattern over the lower-cased text.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from engine._clock import wall
from engine.store._cache import Caches, Guard, Listed, Recent
from engine.store._db import Db


@dataclass(frozen=True, slots=True)
class MemoryItem:
    id: int
    text: str
    created_at: float
    used_at: float


_CACHED_CHARS = 8_000  # an owner's items kept in memory up to this much text
_OWNERS_KEPT = 1024  # owners whose items are kept in memory


class Memory:
    def __init__(self, db: Db, caches: Caches) -> None:
        self.db = db
        # Each owner's items as a prompt reads them (no query), when only this process writes
        # the store: (how many were asked for, the items). A turn reads them every time.
        self._cache = (
            Recent[str, tuple[int, list[MemoryItem]]](_OWNERS_KEPT) if caches.enabled else None
        )
        self._guard = Guard[str]()
        self._listed = Listed[str]()  # the owners of memory (list_owners)
        caches.enroll(self._drop)

    async def list_owners(self) -> None:
        """Read who has memory (at open, and after another process wrote)."""
        rows = await self.db.fetch("SELECT DISTINCT owner FROM memory")
        self._listed.load(r["owner"] for r in rows)

    def _drop(self) -> None:
        if self._cache is not None:
            self._cache.clear()
        self._guard.forget_all()
        self._listed.clear()

    @contextlib.asynccontextmanager
    async def _changing(self, owner: str) -> AsyncIterator[None]:
        """Around a write of the owner's items: the cached ones go."""
        if self._cache is None:
            yield
            return
        self._guard.writing(owner)
        self._cache.pop(owner, None)
        self._listed.add(owner)
        try:
            yield
        finally:
            self._guard.written(owner)
            self._cache.pop(owner, None)

    async def add(self, owner: str, text: str) -> int:
        async with self._changing(owner):
            return await self._add(owner, text)

    async def _add(self, owner: str, text: str) -> int:
        """Save `text` for `owner` and return its id (an existing equal item's, touched)."""
        now = wall()
        async with self.db.transaction():
            found = await self.db.fetchval(
                "SELECT id FROM memory WHERE owner=? AND lower(text)=lower(?)", owner, text
            )
            if found is not None:
                await self.db.execute("UPDATE memory SET used_at=? WHERE id=?", now, found)
                return int(found)
            return int(
                await self.db.fetchval(
                    "INSERT INTO memory(owner, text, created_at, used_at) VALUES (?,?,?,?) "
                    "RETURNING id",
                    owner,
                    text,
                    now,
                    now,
                )
            )

    async def items(
        self, owner: str, query: str | None = None, limit: int = 50
    ) -> list[MemoryItem]:
        """The owner's items (those containing `query` when given), most recently used first."""
        if query or self._cache is None:
            return await self._items(owner, query, limit)
        if not self._guard.busy(owner) and self._listed.none(owner):
            return []
        if not self._guard.busy(owner) and (known := self._cache.use(owner)) is not None:
            if known[0] >= limit or len(known[1]) < known[0]:  # holds all that is asked for
                return known[1][:limit]
        mark = self._guard.reading(owner)
        items = None
        try:
            items = await self._items(owner, None, limit)
        finally:
            if self._guard.keeps(owner, mark) and items is not None:
                if sum(len(i.text) for i in items) <= _CACHED_CHARS:
                    self._cache[owner] = (limit, items)
        return list(items)

    async def _items(self, owner: str, query: str | None, limit: int) -> list[MemoryItem]:
        sql = "SELECT id, text, created_at, used_at FROM memory WHERE owner=?"
        params: tuple[object, ...] = (owner,)
        if query:
            sql += " AND lower(text) LIKE lower(?) ESCAPE '\\'"
            escaped = query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            params += (f"%{escaped}%",)
        rows = await self.db.fetch(sql + " ORDER BY used_at DESC, id DESC LIMIT ?", *params, limit)
        return [MemoryItem(r["id"], r["text"], r["created_at"], r["used_at"]) for r in rows]

    async def touch(self, owner: str, ids: Sequence[int]) -> None:
        """Mark the owner's items `ids` as used now."""
        if not ids:
            return
        among, params = self.db.dialect.among(ids)
        async with self._changing(owner):
            await self.db.execute(
                f"UPDATE memory SET used_at=? WHERE owner=? AND id {among}",
                wall(),
                owner,
                *params,
            )

    async def delete(self, owner: str, item_id: int) -> bool:
        """Delete one of the owner's items; False when the owner has no such item."""
        async with self._changing(owner):
            deleted = await self.db.execute(
                "DELETE FROM memory WHERE owner=? AND id=?", owner, item_id
            )
        return deleted == 1

    async def clear(self, owner: str) -> int:
        """Delete all of the owner's items; returns how many there were."""
        async with self._changing(owner):
            return await self.db.execute("DELETE FROM memory WHERE owner=?", owner)
