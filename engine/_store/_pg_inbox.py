"""The inbox in PostgreSQL: every inbound message, committed before anything else happens.

The rows and their attachments' JSON are the SQLite backend's (``_sqlite_inbox``'s helpers).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from engine._channel import InboundMessage
from engine._store._pg_conversations import PgConversations
from engine._store._pg_db import PgDb
from engine._store._records import InboxRow, InboxState
from engine._store._sqlite_inbox import _dump, _load
from engine.models import Message

_COLS = (
    "id, channel, chat_id, message_id, user_id, user_name, text, is_private, state, hold_until, "
    "media"
)


class PgInbox:
    def __init__(self, db: PgDb, conversations: PgConversations) -> None:
        self.db = db
        self.conversations = conversations

    async def accept(self, msg: InboundMessage, *, hold_until: float | None = None) -> bool:
        added = await self.db.execute(
            "INSERT INTO inbox(channel, chat_id, message_id, user_id, user_name, text, "
            "is_private, media, received_at, hold_until) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10) "
            "ON CONFLICT (channel, chat_id, message_id) DO NOTHING",
            msg.channel,
            msg.chat_id,
            msg.message_id,
            msg.user_id,
            msg.user_name,
            msg.text,
            msg.is_private,
            _dump(msg.attachments),
            time.time(),
            hold_until,
        )
        return added == 1

    async def ready(self, channel: str, chat_id: str) -> list[InboxRow]:
        found = await self.db.fetch(
            f"SELECT {_COLS} FROM inbox WHERE state='queued' AND channel=$1 AND chat_id=$2 "
            "AND (hold_until IS NULL OR hold_until <= $3) ORDER BY id",
            channel,
            chat_id,
            time.time(),
        )
        return [_row(r) for r in found]

    async def take_queued(self, channel: str, chat_id: str) -> list[InboxRow]:
        rows = await self.ready(channel, chat_id)
        if not rows:
            return rows
        conv = await self.conversations.active(channel, chat_id, is_private=rows[-1].is_private)
        await self.take(
            conv.id, [(row, Message.user(row.text, speaker=row.speaker)) for row in rows]
        )
        return rows

    async def take(self, conversation_id: int, taken: Sequence[tuple[InboxRow, Message]]) -> None:
        if not taken:
            return
        async with self.db.transaction():
            for row, msg in taken:
                await self.conversations.append(conversation_id, msg, user_id=row.user_id)
            await self.db.execute(
                "UPDATE inbox SET state='taken', taken_at=$2 WHERE id = ANY($1::bigint[])",
                [row.id for row, _ in taken],
                time.time(),
            )

    async def rows(self, state: Any, channel: str, chat_id: str) -> list[InboxRow]:
        found = await self.db.fetch(
            f"SELECT {_COLS} FROM inbox WHERE state=$1 AND channel=$2 AND chat_id=$3 ORDER BY id",
            InboxState(state).value,
            channel,
            chat_id,
        )
        return [_row(r) for r in found]

    async def answered(self, ids: Sequence[int]) -> None:
        if ids:
            await self.db.execute(
                "UPDATE inbox SET state='answered' WHERE id = ANY($1::bigint[])", list(ids)
            )

    async def unfinished_chats(self) -> list[tuple[str, str]]:
        rows = await self.db.fetch(
            "SELECT channel, chat_id FROM inbox WHERE state <> 'answered' "
            "UNION SELECT channel, chat_id FROM deliveries WHERE state = 'pending'"
        )
        return [(r["channel"], r["chat_id"]) for r in rows]

    async def sent_since(self, channel: str, user_id: str, since: float) -> list[float]:
        rows = await self.db.fetch(
            "SELECT received_at FROM inbox WHERE channel=$1 AND user_id=$2 AND received_at>=$3 "
            "ORDER BY received_at",
            channel,
            user_id,
            since,
        )
        return [r["received_at"] for r in rows]

    async def next_release(self, channel: str, chat_id: str) -> float | None:
        return await self.db.fetchval(
            "SELECT MIN(hold_until) FROM inbox WHERE channel=$1 AND chat_id=$2 "
            "AND state='queued' AND hold_until IS NOT NULL",
            channel,
            chat_id,
        )

    async def prune(self, older_than: float) -> int:
        return await self.db.execute(
            "DELETE FROM inbox WHERE state='answered' AND received_at < $1", older_than
        )


def _row(r: Any) -> InboxRow:
    return InboxRow(
        r["id"],
        r["channel"],
        r["chat_id"],
        r["message_id"],
        r["user_id"],
        r["user_name"],
        r["text"],
        r["is_private"],
        InboxState(r["state"]),
        hold_until=r["hold_until"],
        attachments=_load(r["media"]),
    )
