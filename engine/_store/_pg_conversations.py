"""Conversations, their messages, and the delivery of answers, in PostgreSQL.

The same rows as the SQLite backend (``_sqlite_conversations``), whose helpers turn a row into
a :class:`Message` and an image into what is stored; an answer and its pending delivery are
written by one statement.
"""

from __future__ import annotations

import json
import time
from collections.abc import Collection

from engine._store._pg_db import PgDb
from engine._store._records import Conversation, Delivery, DeliveryState
from engine._store._sqlite_conversations import _image, message_from_row
from engine.models import Message, Role

_ACTIVE = "SELECT id, is_private FROM conversations WHERE channel=$1 AND chat_id=$2 AND active"
_MESSAGE_COLS = "role, content, tool_calls, tool_call_id, is_error, speaker, media"


class PgConversations:
    def __init__(self, db: PgDb) -> None:
        self.db = db

    async def active(self, channel: str, chat_id: str, *, is_private: bool = True) -> Conversation:
        row = await self.db.fetchrow(_ACTIVE, channel, chat_id)
        while row is None:  # an upsert: two instances creating it at once get the same row
            await self.db.execute(
                "INSERT INTO conversations(channel, chat_id, is_private, created_at) "
                "VALUES ($1,$2,$3,$4) ON CONFLICT (channel, chat_id) WHERE active DO NOTHING",
                channel,
                chat_id,
                is_private,
                time.time(),
            )
            row = await self.db.fetchrow(_ACTIVE, channel, chat_id)
        return Conversation(row["id"], channel, chat_id, row["is_private"])

    async def reset(self, channel: str, chat_id: str) -> None:
        await self.db.execute(
            "UPDATE conversations SET active=FALSE WHERE channel=$1 AND chat_id=$2 AND active",
            channel,
            chat_id,
        )

    async def append(
        self,
        conversation_id: int,
        msg: Message,
        *,
        deliver: str | None = None,
        user_id: str | None = None,
    ) -> int:
        calls = msg.tool_calls
        result = msg.result
        images = [_image(i) for i in msg.images]
        return int(
            await self.db.fetchval(
                "WITH m AS (INSERT INTO messages(conversation_id, role, content, tool_calls, "
                "tool_call_id, is_error, speaker, media, created_at, user_id) "
                "VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$12) RETURNING id), "
                "d AS (INSERT INTO deliveries(message_id, conversation_id, channel, chat_id, "
                "reply_to, created_at) SELECT m.id, c.id, c.channel, c.chat_id, $11, $9 "
                "FROM m, conversations c WHERE c.id = $1 AND $10) "
                "SELECT id FROM m",
                conversation_id,
                msg.role.value,
                msg.text,
                json.dumps([[c.id, c.name, c.arguments] for c in calls]) if calls else None,
                result.call_id if result else None,
                bool(result and result.is_error),
                msg.speaker,
                json.dumps(images) if images else None,
                time.time(),
                deliver is not None,
                deliver or None,
                user_id,
            )
        )

    async def history(self, conversation_id: int, limit: int = 200) -> list[Message]:
        rows = await self.db.fetch(
            f"SELECT {_MESSAGE_COLS} FROM messages WHERE conversation_id=$1 "
            "ORDER BY id DESC LIMIT $2",
            conversation_id,
            limit,
        )
        msgs = [message_from_row(r) for r in reversed(rows)]
        if len(rows) == limit:  # cut at a user message so no tool result loses its call
            while msgs and msgs[0].role is not Role.USER:
                msgs.pop(0)
        return msgs

    async def last(self, conversation_id: int) -> Message | None:
        row = await self.db.fetchrow(
            f"SELECT {_MESSAGE_COLS} FROM messages WHERE conversation_id=$1 "
            "ORDER BY id DESC LIMIT 1",
            conversation_id,
        )
        return message_from_row(row) if row is not None else None

    async def rewind(self, conversation_id: int, *, keep_question: bool = False) -> int:
        last_user = await self.db.fetchval(
            "SELECT MAX(id) FROM messages WHERE conversation_id=$1 AND role='user'",
            conversation_id,
        )
        if last_user is None:
            return 0
        after = ">" if keep_question else ">="
        return await self.db.execute(
            f"DELETE FROM messages WHERE conversation_id=$1 AND id {after} $2",
            conversation_id,
            last_user,
        )

    async def close_dangling(
        self, conversation_id: int, reason: str, *, keep: Collection[str] = ()
    ) -> int:
        rows = await self.db.fetch(
            "SELECT tool_calls FROM messages WHERE conversation_id=$1 AND tool_calls IS NOT NULL "
            "ORDER BY id DESC LIMIT 5",
            conversation_id,
        )
        wanted = [c[0] for r in rows for c in json.loads(r["tool_calls"])]
        if not wanted:
            return 0
        have = {
            r["tool_call_id"]
            for r in await self.db.fetch(
                "SELECT tool_call_id FROM messages WHERE conversation_id=$1 AND "
                "tool_call_id = ANY($2::text[])",
                conversation_id,
                wanted,
            )
        }
        missing = [cid for cid in wanted if cid not in have and cid not in keep]
        async with self.db.transaction():
            for cid in missing:
                await self.append(conversation_id, Message.tool_result(cid, reason, is_error=True))
        return len(missing)

    async def undelivered(self, channel: str, chat_id: str) -> list[Delivery]:
        rows = await self.db.fetch(
            "SELECT d.message_id, d.conversation_id, d.channel, d.chat_id, m.content AS text, "
            "d.reply_to, d.state, d.ref FROM deliveries d JOIN messages m ON m.id = d.message_id "
            "WHERE d.state='pending' AND d.channel=$1 AND d.chat_id=$2 ORDER BY d.message_id",
            channel,
            chat_id,
        )
        return [
            Delivery(
                r["message_id"],
                r["conversation_id"],
                r["channel"],
                r["chat_id"],
                r["text"] or "",
                r["reply_to"],
                DeliveryState(r["state"]),
                r["ref"],
            )
            for r in rows
        ]

    async def delivered(self, message_id: int, ref: str | None, *, failed: bool = False) -> None:
        state = DeliveryState.FAILED if failed else DeliveryState.SENT
        await self.db.execute(
            "UPDATE deliveries SET state=$1, ref=$2, sent_at=$3 "
            "WHERE message_id=$4 AND state='pending'",
            state.value,
            ref,
            time.time(),
            message_id,
        )
