"""Notes, for every backend: the memory of the remember / recall / forget tools, per owner.

A search is literal and ignores case: the query's ``%``, ``_`` and ``\\`` are escaped in a LIKE
pattern over the lower-cased text.
"""

from __future__ import annotations

import time

from engine.store._db import Db


class Notes:
    def __init__(self, db: Db) -> None:
        self.db = db

    async def add_note(self, owner: str, text: str) -> int:
        return int(
            await self.db.fetchval(
                "INSERT INTO notes(owner, text, created_at) VALUES (?,?,?) RETURNING id",
                owner,
                text,
                time.time(),
            )
        )

    async def list_notes(
        self, owner: str, query: str | None = None, limit: int = 20
    ) -> list[tuple[int, str, float]]:
        sql = "SELECT id, text, created_at FROM notes WHERE owner=?"
        params: tuple[object, ...] = (owner,)
        if query:
            sql += " AND lower(text) LIKE lower(?) ESCAPE '\\'"
            escaped = query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            params += (f"%{escaped}%",)
        rows = await self.db.fetch(sql + " ORDER BY id DESC LIMIT ?", *params, limit)
        return [(r["id"], r["text"], r["created_at"]) for r in rows]

    async def delete_note(self, owner: str, note_id: int) -> bool:
        return (
            await self.db.execute("DELETE FROM notes WHERE owner=? AND id=?", owner, note_id) == 1
        )
