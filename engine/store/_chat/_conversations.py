# Left whole: one table family, conversations and their messages with their deliveries, written once
# for both backends.
"""Conversations, their messages, and the delivery of answers, for every backend.

A message is stored with its parts as columns (engine/store/_chat/_message_rows.py: tool calls,
images and the model's reasoning as JSON, reasoning with its API's item verbatim). An answer
still to be delivered gets a ``deliveries`` row in the same transaction (PostgreSQL: the same
statement).

A turn the user stopped (/stop, Ctrl-C, the console's cancel) keeps its messages, each marked
with when it was stopped (``stopped_at``): every read a request is built from leaves them out
(here and engine/store/_chat/_context.py), so no later request carries what the user took back, and
nothing is folded into a summary from them; the console still shows them, marked.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from typing import Any

from engine._clock import wall
from engine.models import Message, Role
from engine.store._cache import Caches, Recent
from engine.store._chat._history import Histories
from engine.store._chat._message_rows import (
    INSERT_MESSAGE,
    MESSAGE_COLS,
    message_from_row,
    message_params,
    stored,
)
from engine.store._db import Db
from engine.store._types._rows import Conversation, Delivery, Summary
from engine.store._types._states import DeliveryState

_ACTIVE_KEPT = 65_536  # chats whose active conversation is kept in memory


class Conversations:
    def __init__(
        self,
        db: Db,
        caches: Caches,
        histories: Histories | None = None,
        summaries: Recent[int, tuple[Summary | None]] | None = None,
    ) -> None:
        self.db = db
        # Each chat's active conversation, asked for several times a turn, is kept in memory
        # when only this process writes the store (reset() ends a conversation; forgetting a
        # user deletes some and drops every cache). The context part's latest messages and
        # summaries are given: the writes here change them.
        self._active = (
            Recent[tuple[str, str], Conversation](_ACTIVE_KEPT) if caches.enabled else None
        )
        self.histories = histories
        self._summaries = summaries
        caches.enroll(self._drop)
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
            params = (channel, chat_id, is_private, wall())
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
        if new and self._summaries is not None:
            self._summaries[conversation.id] = (None,)
        return conversation

    def _drop(self) -> None:
        if self._active is not None:
            self._active.clear()

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
        params = message_params(conversation_id, msg, user_id)
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
            return int(await self.db.fetchval(INSERT_MESSAGE + " RETURNING id", *params))
        delivery = (deliver or None, wall(), params[0])
        if self.db.dialect.writable_cte:  # the answer and its delivery in one statement
            return int(await self.db.fetchval(_APPEND_DELIVERED, *params, *delivery))
        (row,), _ = await self.db.together(  # one trip (SQLite: the id the INSERT just made)
            (INSERT_MESSAGE + " RETURNING id", params),
            (_DELIVERY.format(message="last_insert_rowid()"), delivery),
        )
        return int(row[0])

    async def take(
        self, conversation_id: int, taken: Sequence[tuple[Message, str]], then: Any
    ) -> None:
        """Append users' messages (each with its user id) and run `then` (a statement and its
        parameters), in one transaction and, where the backend can, one trip."""
        inserts = [
            (INSERT_MESSAGE + " RETURNING id", message_params(conversation_id, msg, user_id))
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

    async def history(
        self, conversation_id: int, limit: int = 200, *, with_stopped: bool = False
    ) -> list[Message]:
        kept = "" if with_stopped else _KEPT
        rows = await self.db.fetch(
            f"SELECT {MESSAGE_COLS} FROM messages WHERE conversation_id=?{kept} "
            "ORDER BY id DESC LIMIT ?",
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
            f"SELECT {MESSAGE_COLS} FROM messages WHERE conversation_id=?{_KEPT} "
            "ORDER BY id DESC LIMIT 1",
            conversation_id,
        )
        return message_from_row(row) if row is not None else None

    async def lasts(self, conversation_ids: Sequence[int]) -> dict[int, Message]:
        found: dict[int, Message] = {}
        for at in range(0, len(conversation_ids), _LASTS_PER_TRIP):
            among, ids = self.db.dialect.among(conversation_ids[at : at + _LASTS_PER_TRIP])
            rows = await self.db.fetch(
                f"SELECT conversation_id, {MESSAGE_COLS} FROM messages WHERE id IN (SELECT "
                f"MAX(id) FROM messages WHERE conversation_id {among}{_KEPT} "
                "GROUP BY conversation_id)",
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
        async with self.db.transaction():
            dropped = await self.db.execute(
                f"DELETE FROM messages WHERE conversation_id=? AND id {after} ?",
                conversation_id,
                last_user,
            )
            if keep_question:  # asked again: a stopped question is the user's again
                await self.db.execute(_UNSTOP, conversation_id, conversation_id, last_user)
        return dropped

    async def stop_turn(self, conversation_id: int) -> int:
        """Mark the turn the user just stopped: from the user messages it answers on, unless it
        was answered already; returns how many messages were marked."""
        if self.histories is not None:
            self.histories.guard.writing(conversation_id)
        try:
            return await self.db.execute(_STOP, wall(), *(conversation_id,) * 6)
        finally:
            if self.histories is not None:
                self.histories.written(conversation_id, None, kept=False)

    async def close_dangling(
        self, conversation_id: int, reason: str, *, keep: Collection[str] = ()
    ) -> int:
        rows = await self.db.fetch(
            "SELECT tool_calls FROM messages WHERE conversation_id=? AND tool_calls IS NOT NULL"
            f"{_KEPT} ORDER BY id DESC LIMIT 5",
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
            (state.value, ref, wall(), message_id),
        )
        if then is None:
            await self.db.execute_later(update[0], *update[1])
        else:
            await self.db.at_once(update, then)


_ACTIVE = "SELECT id, is_private FROM conversations WHERE channel=? AND chat_id=? AND active = TRUE"
_LASTS_PER_TRIP = 500  # conversations whose last message one statement reads
_KEPT = " AND stopped_at IS NULL"  # leaves out the turns the user stopped
# The latest turn, from the first of the user messages it answers (those after the last other
# message kept), unless an answer (text, no calls) came after them: marked stopped.
_STOP = (
    "UPDATE messages SET stopped_at = ? WHERE conversation_id = ? AND stopped_at IS NULL "
    "AND id > (SELECT COALESCE(MAX(id), 0) FROM messages WHERE conversation_id = ? "
    "AND stopped_at IS NULL AND role <> 'user' AND id < (SELECT MAX(id) FROM messages "
    "WHERE conversation_id = ? AND stopped_at IS NULL AND role = 'user')) "
    "AND NOT EXISTS (SELECT 1 FROM messages a WHERE a.conversation_id = ? "
    "AND a.stopped_at IS NULL AND a.role = 'assistant' AND a.tool_calls IS NULL "
    "AND a.content <> '' AND a.id > (SELECT MAX(id) FROM messages WHERE conversation_id = ? "
    "AND stopped_at IS NULL AND role = 'user')) "
    "AND EXISTS (SELECT 1 FROM messages u WHERE u.conversation_id = ? AND u.stopped_at IS NULL "
    "AND u.role = 'user')"
)
# /retry of a stopped question: its user messages (those stopped with it) are kept again
_UNSTOP = (
    "UPDATE messages SET stopped_at = NULL WHERE conversation_id = ? AND role = 'user' "
    "AND stopped_at = (SELECT stopped_at FROM messages WHERE conversation_id = ? AND id = ?)"
)
# An answer's delivery, to be made (`message`: how the statement names the message's id)
_DELIVERY = (
    "INSERT INTO deliveries(message_id, conversation_id, channel, chat_id, reply_to, created_at) "
    "SELECT {message}, id, channel, chat_id, ?, ? FROM conversations WHERE id = ?"
)
_APPEND_DELIVERED = (
    f"WITH m AS ({INSERT_MESSAGE} RETURNING id), "
    f"d AS ({_DELIVERY.format(message='(SELECT id FROM m)')}) SELECT id FROM m"
)
