"""The inbox in SQLite: every inbound message, committed before anything else happens."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from engine._channel import InboundMessage
from engine._model import Message
from engine._store._records import InboxRow, InboxState
from engine._store._sqlite_conversations import SqliteConversations
from engine._store._sqlite_db import SqliteDb, marks

_COLS = "id, channel, chat_id, message_id, user_id, user_name, text, is_private, state, hold_until"


class SqliteInbox:
    def __init__(self, db: SqliteDb, conversations: SqliteConversations) -> None:
        self.db = db
        self.conversations = conversations

    async def accept(self, msg: InboundMessage, *, hold_until: float | None = None) -> bool:
        cur = await self.db.write(
            "INSERT INTO inbox(channel, chat_id, message_id, user_id, user_name, text, "
            "is_private, received_at, hold_until) VALUES (?,?,?,?,?,?,?,?,?) "
            "ON CONFLICT (channel, chat_id, message_id) DO NOTHING",
            (
                msg.channel,
                msg.chat_id,
                msg.message_id,
                msg.user_id,
                msg.user_name,
                msg.text,
                int(msg.is_private),
                time.time(),
                hold_until,
            ),
        )
        return cur.rowcount == 1

    async def take_queued(self, channel: str, chat_id: str) -> list[InboxRow]:
        now = time.time()
        rows = [
            r
            for r in await self.rows(InboxState.QUEUED, channel, chat_id)
            if r.hold_until is None or r.hold_until <= now
        ]
        if not rows:
            return rows
        conv = await self.conversations.active(channel, chat_id, is_private=rows[-1].is_private)
        async with self.db.transaction():
            for row in rows:
                speaker = None if row.is_private else row.user_name or "someone"
                await self.conversations.append(conv.id, Message.user(row.text, speaker=speaker))
            await self.db.write(
                f"UPDATE inbox SET state='taken' WHERE id IN ({marks(len(rows))})",
                tuple(r.id for r in rows),
            )
        return rows

    async def rows(self, state: Any, channel: str, chat_id: str) -> list[InboxRow]:
        found = await self.db.all(
            f"SELECT {_COLS} FROM inbox WHERE state=? AND channel=? AND chat_id=? ORDER BY id",
            (InboxState(state).value, channel, chat_id),
        )
        return [
            InboxRow(
                r["id"],
                r["channel"],
                r["chat_id"],
                r["message_id"],
                r["user_id"],
                r["user_name"],
                r["text"],
                bool(r["is_private"]),
                InboxState(r["state"]),
                r["hold_until"],
            )
            for r in found
        ]

    async def answered(self, ids: Sequence[int]) -> None:
        if ids:
            await self.db.write(
                f"UPDATE inbox SET state='answered' WHERE id IN ({marks(len(ids))})", tuple(ids)
            )

    async def unfinished_chats(self) -> list[tuple[str, str]]:
        rows = await self.db.all(
            "SELECT DISTINCT channel, chat_id FROM inbox WHERE state != 'answered' "
            "UNION SELECT DISTINCT channel, chat_id FROM deliveries WHERE state = 'pending'"
        )
        return [(r["channel"], r["chat_id"]) for r in rows]

    async def sent_since(self, channel: str, user_id: str, since: float) -> list[float]:
        """When the user's messages received since `since` arrived, oldest first."""
        rows = await self.db.all(
            "SELECT received_at FROM inbox WHERE channel=? AND user_id=? AND received_at>=? "
            "ORDER BY received_at",
            (channel, user_id, since),
        )
        return [r["received_at"] for r in rows]

    async def next_release(self, channel: str, chat_id: str) -> float | None:
        """When the chat's earliest held message may be taken (None: none held)."""
        row = await self.db.one(
            "SELECT MIN(hold_until) AS t FROM inbox WHERE channel=? AND chat_id=? "
            "AND state='queued' AND hold_until IS NOT NULL",
            (channel, chat_id),
        )
        return row["t"] if row is not None else None

    async def prune(self, older_than: float) -> int:
        cur = await self.db.write(
            "DELETE FROM inbox WHERE state='answered' AND received_at < ?", (older_than,)
        )
        return cur.rowcount
