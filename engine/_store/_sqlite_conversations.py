"""Conversations, their messages, and the delivery of answers, in SQLite."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Collection
from typing import Any

from engine._store._records import Conversation, Delivery, DeliveryState
from engine._store._sqlite_db import SqliteDb, marks
from engine.models import Image, Message, Part, Role, Text, ToolCall, ToolOutput


class SqliteConversations:
    def __init__(self, db: SqliteDb) -> None:
        self.db = db
        # Each chat's active conversation, asked for several times a turn. The file is this
        # process's alone (one daemon a store); reset() ends a conversation, forgetting a user
        # deletes some (the ops part empties this then: it is the db's).
        self._active = db.active_conversations

    async def active(self, channel: str, chat_id: str, *, is_private: bool = True) -> Conversation:
        known = self._active.get((channel, chat_id))
        if known is not None:
            return known
        sql = "SELECT id, is_private FROM conversations WHERE channel=? AND chat_id=? AND active=1"
        row = await self.db.one(sql, (channel, chat_id))
        if row is None:  # an upsert: two tasks creating it at once both get the same row
            await self.db.write(
                "INSERT INTO conversations(channel, chat_id, is_private, created_at) "
                "VALUES (?,?,?,?) ON CONFLICT (channel, chat_id) WHERE active = 1 DO NOTHING",
                (channel, chat_id, int(is_private), time.time()),
            )
            row = await self.db.one(sql, (channel, chat_id))
            assert row is not None
        conversation = Conversation(row["id"], channel, chat_id, bool(row["is_private"]))
        self._active[channel, chat_id] = conversation
        return conversation

    async def reset(self, channel: str, chat_id: str) -> None:
        try:
            await self.db.write(
                "UPDATE conversations SET active=0 WHERE channel=? AND chat_id=? AND active=1",
                (channel, chat_id),
            )
        finally:  # after the write: a read that raced it has cached the old one by now
            self._active.pop((channel, chat_id), None)

    async def append(
        self,
        conversation_id: int,
        msg: Message,
        *,
        deliver: str | None = None,
        user_id: str | None = None,
    ) -> int:
        params = _message_params(conversation_id, msg, user_id)
        if deliver is None:  # one statement: no transaction of its own needed
            return (await self.db.write(_INSERT_MESSAGE, params)).lastrowid or 0
        async with self.db.transaction():
            message_id = (await self.db.write(_INSERT_MESSAGE, params)).lastrowid or 0
            await self.db.write_later(
                "INSERT INTO deliveries(message_id, conversation_id, channel, chat_id, "
                "reply_to, created_at) SELECT ?, id, channel, chat_id, ?, ? "
                "FROM conversations WHERE id=?",
                (message_id, deliver or None, time.time(), conversation_id),
            )
        return message_id

    async def append_later(self, conversation_id: int, msg: Message, user_id: str) -> None:
        """Append a message whose id nobody needs, inside a transaction (see write_later)."""
        await self.db.write_later(_INSERT_MESSAGE, _message_params(conversation_id, msg, user_id))

    async def history(self, conversation_id: int, limit: int = 200) -> list[Message]:
        rows = await self.db.all(
            "SELECT role, content, tool_calls, tool_call_id, is_error, speaker, media "
            "FROM messages WHERE conversation_id=? ORDER BY id DESC LIMIT ?",
            (conversation_id, limit),
        )
        msgs = [message_from_row(r) for r in reversed(rows)]
        if len(rows) == limit:  # cut at a user message so no tool result loses its call
            while msgs and msgs[0].role is not Role.USER:
                msgs.pop(0)
        return msgs

    async def last(self, conversation_id: int) -> Message | None:
        row = await self.db.one(
            "SELECT role, content, tool_calls, tool_call_id, is_error, speaker, media "
            "FROM messages WHERE conversation_id=? ORDER BY id DESC LIMIT 1",
            (conversation_id,),
        )
        return message_from_row(row) if row is not None else None

    async def rewind(self, conversation_id: int, *, keep_question: bool = False) -> int:
        row = await self.db.one(
            "SELECT MAX(id) AS id FROM messages WHERE conversation_id=? AND role='user'",
            (conversation_id,),
        )
        if row is None or row["id"] is None:
            return 0
        after = ">" if keep_question else ">="
        cur = await self.db.write(
            f"DELETE FROM messages WHERE conversation_id=? AND id {after} ?",
            (conversation_id, row["id"]),
        )
        return cur.rowcount

    async def close_dangling(
        self, conversation_id: int, reason: str, *, keep: Collection[str] = ()
    ) -> int:
        rows = await self.db.all(
            "SELECT tool_calls FROM messages WHERE conversation_id=? AND tool_calls IS NOT NULL "
            "ORDER BY id DESC LIMIT 5",
            (conversation_id,),
        )
        wanted = [c[0] for r in rows for c in json.loads(r["tool_calls"])]
        if not wanted:
            return 0
        have = {
            r["tool_call_id"]
            for r in await self.db.all(
                f"SELECT tool_call_id FROM messages WHERE conversation_id=? AND "
                f"tool_call_id IN ({marks(len(wanted))})",
                (conversation_id, *wanted),
            )
        }
        missing = [cid for cid in wanted if cid not in have and cid not in keep]
        async with self.db.transaction():
            for cid in missing:
                await self.append(conversation_id, Message.tool_result(cid, reason, is_error=True))
        return len(missing)

    async def undelivered(self, channel: str, chat_id: str) -> list[Delivery]:
        rows = await self.db.all(
            "SELECT d.message_id, d.conversation_id, d.channel, d.chat_id, m.content AS text, "
            "d.reply_to, d.state, d.ref FROM deliveries d JOIN messages m ON m.id = d.message_id "
            "WHERE d.state='pending' AND d.channel=? AND d.chat_id=? ORDER BY d.message_id",
            (channel, chat_id),
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
        await self.db.write_later(
            "UPDATE deliveries SET state=?, ref=?, sent_at=? "
            "WHERE message_id=? AND state='pending'",
            (state.value, ref, time.time(), message_id),
        )


_INSERT_MESSAGE = (
    "INSERT INTO messages(conversation_id, role, content, tool_calls, tool_call_id, is_error, "
    "speaker, media, created_at, user_id) VALUES (?,?,?,?,?,?,?,?,?,?)"
)


def _message_params(conversation_id: int, msg: Message, user_id: str | None) -> tuple[Any, ...]:
    calls = msg.tool_calls
    result = msg.result
    images = [_image(i) for i in msg.images]
    return (
        conversation_id,
        msg.role.value,
        msg.text,
        json.dumps([[c.id, c.name, c.arguments] for c in calls]) if calls else None,
        result.call_id if result else None,
        int(bool(result and result.is_error)),
        msg.speaker,
        json.dumps(images) if images else None,
        time.time(),
        user_id,
    )


def _image(image: Image) -> dict[str, Any]:
    """An image as stored: its reference, never its bytes (those are fetched again)."""
    stored: dict[str, Any] = {"type": image.media_type, "url": image.url, "name": image.name}
    if image.ref is not None:
        stored |= {"ref": image.ref, "size": image.size}
    return stored


def message_from_row(r: sqlite3.Row) -> Message:
    """A stored message (its columns by name) as the neutral Message."""
    role = Role(r["role"])
    parts: list[Part] = []
    if role is Role.TOOL:
        parts.append(ToolOutput(r["tool_call_id"] or "", r["content"] or "", bool(r["is_error"])))
    else:
        if r["content"]:
            parts.append(Text(r["content"]))
        for i in json.loads(r["media"]) if r["media"] else ():
            parts.append(
                Image(i["type"], None, i.get("url"), i.get("name", ""), i.get("ref"), i.get("size"))
            )
        if r["tool_calls"]:
            parts.extend(ToolCall(*c) for c in json.loads(r["tool_calls"]))
    return Message(role, parts, r["speaker"])
