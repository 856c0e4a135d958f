"""Notes in SQLite: the memory of the remember / recall / forget tools, per owner."""

from __future__ import annotations

import time

from engine._store._sqlite_db import SqliteDb


class SqliteNotes:
    def __init__(self, db: SqliteDb) -> None:
        self.db = db

    async def add_note(self, owner: str, text: str) -> int:
        cur = await self.db.write(
            "INSERT INTO notes(owner, text, created_at) VALUES (?,?,?)", (owner, text, time.time())
        )
        return cur.lastrowid or 0

    async def list_notes(
        self, owner: str, query: str | None = None, limit: int = 20
    ) -> list[tuple[int, str, float]]:
        sql = "SELECT id, text, created_at FROM notes WHERE owner=?"
        params: tuple[object, ...] = (owner,)
        if query:
            sql += " AND text LIKE ? ESCAPE '\\'"
            escaped = query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            params += (f"%{escaped}%",)
        rows = await self.db.all(sql + " ORDER BY id DESC LIMIT ?", (*params, limit))
        return [(r["id"], r["text"], r["created_at"]) for r in rows]

    async def delete_note(self, owner: str, note_id: int) -> bool:
        cur = await self.db.write("DELETE FROM notes WHERE owner=? AND id=?", (owner, note_id))
        return cur.rowcount == 1
