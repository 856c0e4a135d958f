"""Conversations, their messages, and the delivery of answers, for every backend.

A message is stored with its parts as columns (tool calls, images and the model's reasoning as
JSON; an image by its reference, never its bytes; reasoning with its API's item verbatim, since
that API refuses the calls of a tool loop resumed after a restart without it). An answer still
to be delivered gets a ``deliveries`` row in the same transaction (PostgreSQL: the same statement).
"""

from __future__ import annotations

import json
import time
from collections.abc import Collection, Sequence
from typing import Any

from engine.models import Image, Message, Part, Reasoning, Role, Text, ToolCall, ToolOutput
from engine.store._db import Db, Row
from engine.store._rows import Conversation, Delivery
from engine.store._states import DeliveryState


class Conversations:
    def __init__(self, db: Db) -> None:
        self.db = db
        # Each chat's active conversation, asked for several times a turn, is kept in memory
        # when only this process writes the store (reset() ends a conversation; forgetting a
        # user deletes some and empties the db's caches).
        self._active = db.active_conversations if db.caches else None
        self.histories = db.histories if db.caches else None  # latest messages (_history.py)
        self._insert_active = (
            "INSERT INTO conversations(channel, chat_id, is_private, created_at) VALUES (?,?,?,?) "
            f"ON CONFLICT (channel, chat_id) WHERE {db.dialect.active_conflict} DO NOTHING"
        )

    async def active(self, channel: str, chat_id: str, *, is_private: bool = True) -> Conversation:
        if self._active is not None and (known := self._active.get((channel, chat_id))):
            return known
        row = await self.db.fetchrow(_ACTIVE, channel, chat_id)
        new = False
        while row is None:  # an upsert: two creating it at once both get the same row
            sql = self._insert_active + " RETURNING id"
            params = (channel, chat_id, is_private, time.time())
            if self.db.dialect.writable_cte:  # a server: one statement at a time, as always
                new = bool(await self.db.fetch(sql, *params))
                row = await self.db.fetchrow(_ACTIVE, channel, chat_id)
            else:  # SQLite: both in one trip
                made, found = await self.db.together((sql, params), (_ACTIVE, (channel, chat_id)))
                new, row = bool(made), (found[0] if found else None)
        conversation = Conversation(row["id"], channel, chat_id, bool(row["is_private"]))
        if self._active is not None:
            self._active[channel, chat_id] = conversation
        if new and self.histories is not None:
            self.histories.fresh(conversation.id)  # it has no messages yet, nor a summary
            self.db.summaries[conversation.id] = (None,)
        return conversation

    async def reset(self, channel: str, chat_id: str) -> None:
        try:
            await self.db.execute(
                "UPDATE conversations SET active = FALSE "
                "WHERE channel=? AND chat_id=? AND active = TRUE",
                channel,
                chat_id,
            )
        finally:  # after the write: a read that raced it has cached the old one by now
            if self._active is not None and (old := self._active.pop((channel, chat_id), None)):
                if self.histories is not None:
                    self.histories.drop(old.id)

    async def append(
        self,
        conversation_id: int,
        msg: Message,
        *,
        deliver: str | None = None,
        user_id: str | None = None,
    ) -> int:
        params = _message_params(conversation_id, msg, user_id)
        if self.histories is None:
            return await self._append(params, deliver)
        self.histories.guard.writing(conversation_id)
        added = None
        try:
            message_id = await self._append(params, deliver)
            added = [(message_id, stored(params))]
            return message_id
        finally:
            kept = not self.db.in_transaction()
            self.histories.written(conversation_id, added, kept=kept)

    async def _append(self, params: tuple[Any, ...], deliver: str | None) -> int:
        if deliver is None:  # one statement: no transaction of its own needed
            return int(await self.db.fetchval(_INSERT_MESSAGE + " RETURNING id", *params))
        delivery = (deliver or None, time.time(), params[0])
        if self.db.dialect.writable_cte:  # the answer and its delivery in one statement
            return int(await self.db.fetchval(_APPEND_DELIVERED, *params, *delivery))
        (row,), _ = await self.db.together(  # one trip (SQLite: the id the INSERT just made)
            (_INSERT_MESSAGE + " RETURNING id", params),
            (_DELIVERY.format(message="last_insert_rowid()"), delivery),
        )
        return int(row[0])

    async def take(
        self, conversation_id: int, taken: Sequence[tuple[Message, str]], then: Any
    ) -> None:
        """Append users' messages (each with its user id) and run `then` (a statement and its
        parameters), in one transaction and, where the backend can, one trip."""
        inserts = [
            (_INSERT_MESSAGE + " RETURNING id", _message_params(conversation_id, msg, user_id))
            for msg, user_id in taken
        ]
        if self.histories is not None:
            self.histories.guard.writing(conversation_id)
        added = None
        try:
            if len(inserts) == 1:  # one statement where the backend can
                rows = await self.db.at_once(inserts[0], then)
                added = [(int(rows[0][0]), stored(inserts[0][1]))]
            else:
                results = await self.db.together(*inserts, then)
                added = [
                    (int(rows[0][0]), stored(p))
                    for rows, (_, p) in zip(results[:-1], inserts, strict=True)
                ]
        finally:
            if self.histories is not None:
                kept = not self.db.in_transaction()
                self.histories.written(conversation_id, added, kept=kept)

    async def history(self, conversation_id: int, limit: int = 200) -> list[Message]:
        rows = await self.db.fetch(
            f"SELECT {MESSAGE_COLS} FROM messages WHERE conversation_id=? ORDER BY id DESC LIMIT ?",
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
            f"SELECT {MESSAGE_COLS} FROM messages WHERE conversation_id=? ORDER BY id DESC LIMIT 1",
            conversation_id,
        )
        return message_from_row(row) if row is not None else None

    async def lasts(self, conversation_ids: Sequence[int]) -> dict[int, Message]:
        found: dict[int, Message] = {}
        for at in range(0, len(conversation_ids), _LASTS_PER_TRIP):
            among, ids = self.db.dialect.among(conversation_ids[at : at + _LASTS_PER_TRIP])
            rows = await self.db.fetch(
                f"SELECT conversation_id, {MESSAGE_COLS} FROM messages WHERE id IN (SELECT "
                f"MAX(id) FROM messages WHERE conversation_id {among} GROUP BY conversation_id)",
                *ids,
            )
            found.update((r["conversation_id"], message_from_row(r)) for r in rows)
        return found

    async def rewind(self, conversation_id: int, *, keep_question: bool = False) -> int:
        if self.histories is not None:
            self.histories.guard.writing(conversation_id)
        try:
            return await self._rewind(conversation_id, keep_question)
        finally:
            if self.histories is not None:
                self.histories.written(conversation_id, None, kept=False)

    async def _rewind(self, conversation_id: int, keep_question: bool) -> int:
        last_user = await self.db.fetchval(
            "SELECT MAX(id) FROM messages WHERE conversation_id=? AND role='user'",
            conversation_id,
        )
        if last_user is None:
            return 0
        after = ">" if keep_question else ">="
        return await self.db.execute(
            f"DELETE FROM messages WHERE conversation_id=? AND id {after} ?",
            conversation_id,
            last_user,
        )

    async def close_dangling(
        self, conversation_id: int, reason: str, *, keep: Collection[str] = ()
    ) -> int:
        rows = await self.db.fetch(
            "SELECT tool_calls FROM messages WHERE conversation_id=? AND tool_calls IS NOT NULL "
            "ORDER BY id DESC LIMIT 5",
            conversation_id,
        )
        wanted = [c[0] for r in rows for c in json.loads(r["tool_calls"])]
        if not wanted:
            return 0
        among, ids = self.db.dialect.among(wanted, "text")
        have = {
            r["tool_call_id"]
            for r in await self.db.fetch(
                "SELECT tool_call_id FROM messages "
                f"WHERE conversation_id=? AND tool_call_id {among}",
                conversation_id,
                *ids,
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
            "WHERE d.state='pending' AND d.channel=? AND d.chat_id=? ORDER BY d.message_id",
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

    async def delivered(
        self, message_id: int, ref: str | None, *, failed: bool = False, then: Any = None
    ) -> None:
        """Record an answer's delivery (and run `then`, a statement independent of it, with
        it: at once)."""
        state = DeliveryState.FAILED if failed else DeliveryState.SENT
        update = (
            "UPDATE deliveries SET state=?, ref=?, sent_at=? "
            "WHERE message_id=? AND state='pending'",
            (state.value, ref, time.time(), message_id),
        )
        if then is None:
            await self.db.execute_later(update[0], *update[1])
        else:
            await self.db.at_once(update, then)


_ACTIVE = "SELECT id, is_private FROM conversations WHERE channel=? AND chat_id=? AND active = TRUE"
_LASTS_PER_TRIP = 500  # conversations whose last message one statement reads
MESSAGE_COLS = "role, content, tool_calls, tool_call_id, is_error, speaker, media, quote, reasoning"

_INSERT_MESSAGE = (
    "INSERT INTO messages(conversation_id, role, content, tool_calls, tool_call_id, is_error, "
    "speaker, media, created_at, user_id, quote, reasoning) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"
)
# An answer's delivery, to be made (`message`: how the statement names the message's id)
_DELIVERY = (
    "INSERT INTO deliveries(message_id, conversation_id, channel, chat_id, reply_to, created_at) "
    "SELECT {message}, id, channel, chat_id, ?, ? FROM conversations WHERE id = ?"
)
_APPEND_DELIVERED = (
    f"WITH m AS ({_INSERT_MESSAGE} RETURNING id), "
    f"d AS ({_DELIVERY.format(message='(SELECT id FROM m)')}) SELECT id FROM m"
)


def _message_params(conversation_id: int, msg: Message, user_id: str | None) -> tuple[Any, ...]:
    calls = msg.tool_calls
    result = msg.result
    images = [_image(i) for i in msg.images]
    reasoning = [[r.api, r.item, r.summary] for r in msg.reasoning]
    return (
        conversation_id,
        msg.role.value,
        msg.text,
        json.dumps([[c.id, c.name, c.arguments] for c in calls]) if calls else None,
        result.call_id if result else None,
        bool(result and result.is_error),
        msg.speaker,
        json.dumps(images) if images else None,
        time.time(),
        user_id,
        msg.quote,
        json.dumps(reasoning) if reasoning else None,
    )


def _image(image: Image) -> dict[str, Any]:
    """An image as stored: its reference, never its bytes (those are fetched again)."""
    stored: dict[str, Any] = {"type": image.media_type, "url": image.url, "name": image.name}
    if image.ref is not None:
        stored |= {"ref": image.ref, "size": image.size}
    return stored


def stored(params: Sequence[Any]) -> Message:
    """The message `params` (of _INSERT_MESSAGE) stores, as reading it back gives it."""
    return message_from_row(dict(zip(_PARAM_COLS, params, strict=True)))


_PARAM_COLS = (
    "conversation_id, role, content, tool_calls, tool_call_id, is_error, speaker, media, "
    "created_at, user_id, quote, reasoning"
).split(", ")


def message_from_row(r: Row) -> Message:
    """A stored message (its columns by name) as the neutral Message."""
    role = Role(r["role"])
    parts: list[Part] = []
    if role is Role.TOOL:
        parts.append(ToolOutput(r["tool_call_id"] or "", r["content"] or "", bool(r["is_error"])))
    else:
        if r["reasoning"]:
            parts.extend(Reasoning(*x) for x in json.loads(r["reasoning"]))
        if r["content"]:
            parts.append(Text(r["content"]))
        for i in json.loads(r["media"]) if r["media"] else ():
            parts.append(
                Image(i["type"], None, i.get("url"), i.get("name", ""), i.get("ref"), i.get("size"))
            )
        if r["tool_calls"]:
            parts.extend(ToolCall(*c) for c in json.loads(r["tool_calls"]))
    return Message(role, parts, r["speaker"], r["quote"])
