"""The context budget's part of the store in SQLite: running summaries and token ratios.

A conversation has at most one summary row, replaced each time it is updated (the messages it
covers stay in ``messages``). Token ratios are one row per model.
"""

from __future__ import annotations

import time

from engine._store._records import Summary, TokenRatio
from engine._store._sqlite_conversations import message_from_row
from engine._store._sqlite_db import SqliteDb
from engine.models import Message, Role


class SqliteContext:
    def __init__(self, db: SqliteDb) -> None:
        self.db = db

    async def summary(self, conversation_id: int) -> Summary | None:
        row = await self.db.one(
            "SELECT text, first_id, last_id FROM summaries WHERE conversation_id=?",
            (conversation_id,),
        )
        if row is None:
            return None
        return Summary(conversation_id, row["text"], row["first_id"], row["last_id"])

    async def save_summary(self, summary: Summary) -> None:
        await self.db.write(
            "INSERT INTO summaries(conversation_id, text, first_id, last_id, updated_at) "
            "VALUES (?,?,?,?,?) ON CONFLICT (conversation_id) DO UPDATE SET text=excluded.text, "
            "first_id=excluded.first_id, last_id=excluded.last_id, "
            "updated_at=excluded.updated_at",
            (
                summary.conversation_id,
                summary.text,
                summary.first_id,
                summary.last_id,
                time.time(),
            ),
        )

    async def messages_after(
        self, conversation_id: int, after_id: int, limit: int
    ) -> list[tuple[int, Message]]:
        rows = await self.db.all(
            "SELECT id, role, content, tool_calls, tool_call_id, is_error, speaker, media "
            "FROM messages WHERE conversation_id=? AND id > MIN(?, COALESCE((SELECT id "
            "FROM messages WHERE conversation_id=? AND role='user' ORDER BY id DESC LIMIT 1), "
            "?+1) - 1) ORDER BY id DESC LIMIT ?",
            (conversation_id, after_id, conversation_id, after_id, limit),
        )
        out = [(r["id"], message_from_row(r)) for r in reversed(rows)]
        if len(rows) == limit:  # cut at a user message so no tool result loses its call
            while out and out[0][1].role is not Role.USER:
                out.pop(0)
        return out

    async def token_ratio(self, model: str) -> TokenRatio | None:
        row = await self.db.one(
            "SELECT ratio, samples, max_window FROM token_ratios WHERE model=?", (model,)
        )
        if row is None:
            return None
        return TokenRatio(model, row["ratio"], row["samples"], row["max_window"])

    async def save_token_ratio(self, ratio: TokenRatio) -> None:
        await self.db.write(
            "INSERT INTO token_ratios(model, ratio, samples, max_window, updated_at) "
            "VALUES (?,?,?,?,?) ON CONFLICT (model) DO UPDATE SET ratio=excluded.ratio, "
            "samples=excluded.samples, max_window=excluded.max_window, "
            "updated_at=excluded.updated_at",
            (ratio.model, ratio.ratio, ratio.samples, ratio.window, time.time()),
        )
