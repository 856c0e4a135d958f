"""The context budget's part of the store in PostgreSQL: running summaries and token ratios.

The same rows as ``_sqlite_context``: at most one summary per conversation, replaced when it is
updated (the messages it covers stay stored), and one token ratio per model. Every instance
reads and writes them; a chat's turns run on one instance at a time (engine/work/_cluster.py), so a
conversation's summary has one writer at a time.
"""

from __future__ import annotations

import time

from engine._store._pg_db import PgDb
from engine._store._records import Summary, TokenRatio
from engine._store._sqlite_conversations import message_from_row
from engine.models import Message, Role


class PgContext:
    def __init__(self, db: PgDb) -> None:
        self.db = db

    async def summary(self, conversation_id: int) -> Summary | None:
        row = await self.db.fetchrow(
            "SELECT text, first_id, last_id FROM summaries WHERE conversation_id=$1",
            conversation_id,
        )
        if row is None:
            return None
        return Summary(conversation_id, row["text"], row["first_id"], row["last_id"])

    async def save_summary(self, summary: Summary) -> None:
        await self.db.execute(
            "INSERT INTO summaries(conversation_id, text, first_id, last_id, updated_at) "
            "VALUES ($1,$2,$3,$4,$5) ON CONFLICT (conversation_id) DO UPDATE SET "
            "text=excluded.text, first_id=excluded.first_id, last_id=excluded.last_id, "
            "updated_at=excluded.updated_at",
            summary.conversation_id,
            summary.text,
            summary.first_id,
            summary.last_id,
            time.time(),
        )

    async def messages_after(
        self, conversation_id: int, after_id: int, limit: int
    ) -> list[tuple[int, Message]]:
        rows = await self.db.fetch(
            "SELECT id, role, content, tool_calls, tool_call_id, is_error, speaker, media "
            "FROM messages WHERE conversation_id=$1 AND id > LEAST($2::bigint, COALESCE((SELECT id "
            "FROM messages WHERE conversation_id=$1 AND role='user' ORDER BY id DESC LIMIT 1), "
            "$2::bigint + 1) - 1) ORDER BY id DESC LIMIT $3",
            conversation_id,
            after_id,
            limit,
        )
        out = [(r["id"], message_from_row(r)) for r in reversed(rows)]
        if len(rows) == limit:  # cut at a user message so no tool result loses its call
            while out and out[0][1].role is not Role.USER:
                out.pop(0)
        return out

    async def token_ratio(self, model: str) -> TokenRatio | None:
        row = await self.db.fetchrow(
            "SELECT ratio, samples, max_window FROM token_ratios WHERE model=$1", model
        )
        if row is None:
            return None
        return TokenRatio(model, row["ratio"], row["samples"], row["max_window"])

    async def save_token_ratio(self, ratio: TokenRatio) -> None:
        await self.db.execute(
            "INSERT INTO token_ratios(model, ratio, samples, max_window, updated_at) "
            "VALUES ($1,$2,$3,$4,$5) ON CONFLICT (model) DO UPDATE SET ratio=excluded.ratio, "
            "samples=excluded.samples, max_window=excluded.max_window, "
            "updated_at=excluded.updated_at",
            ratio.model,
            ratio.ratio,
            ratio.samples,
            ratio.window,
            time.time(),
        )
