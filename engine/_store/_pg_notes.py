"""Notes in PostgreSQL: the memory of the remember / recall / forget tools, per owner."""

from __future__ import annotations

import time

from engine._store._pg_db import PgDb


class PgNotes:
    def __init__(self, db: PgDb) -> None:
        self.db = db

    async def add_note(self, owner: str, text: str) -> int:
        return int(
            await self.db.fetchval(
                "INSERT INTO notes(owner, text, created_at) VALUES ($1,$2,$3) RETURNING id",
                owner,
                text,
                time.time(),
            )
        )

    async def list_notes(
        self, owner: str, query: str | None = None, limit: int = 20
    ) -> list[tuple[int, str, float]]:
        if query:  # literally: strpos, not a LIKE pattern
            rows = await self.db.fetch(
                "SELECT id, text, created_at FROM notes WHERE owner=$1 AND "
                "strpos(lower(text), lower($2)) > 0 ORDER BY id DESC LIMIT $3",
                owner,
                query,
                limit,
            )
        else:
            rows = await self.db.fetch(
                "SELECT id, text, created_at FROM notes WHERE owner=$1 ORDER BY id DESC LIMIT $2",
                owner,
                limit,
            )
        return [(r["id"], r["text"], r["created_at"]) for r in rows]

    async def delete_note(self, owner: str, note_id: int) -> bool:
        return (
            await self.db.execute("DELETE FROM notes WHERE owner=$1 AND id=$2", owner, note_id) == 1
        )
