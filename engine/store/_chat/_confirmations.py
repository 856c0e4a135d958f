"""Confirmations, for every backend: destructive calls waiting for, or carrying, their
requester's answer. A transition is one conditional UPDATE (of two instances seeing the same
press, one moves the row), after the one guard of the state machine (``_states.guard``). Rows
come back oldest first: by ``created_at, id``, a total order, on every backend."""

from __future__ import annotations

import hashlib
import json

from engine._clock import wall
from engine.models import ToolCall
from engine.store._cache import Caches, Guard, Listed, Recent
from engine.store._db import Db, Row
from engine.store._types._rows import ConfirmationRow
from engine.store._types._states import CONFIRMATION_TRANSITIONS, ConfirmationState, guard

_COLS = (
    "id, conversation_id, channel, chat_id, user_id, user_name, tool, call_id, args, summary, "
    "details, remaining, iteration, state, message_ref, reply_to, expires_at, offered"
)


_QUIET_KEPT = 65_536  # chats known to have no pending confirmation


class Confirmations:
    def __init__(self, db: Db, caches: Caches) -> None:
        self.db = db
        # The chats known to have no pending confirmation (every message asks), when only this
        # process writes the store: only add() makes a pending one.
        self._quiet = Recent[tuple[str, str], bool](_QUIET_KEPT) if caches.enabled else None
        self._guard = Guard[tuple[str, str]]()
        self._listed = Listed[tuple[str, str]]()  # the chats with pending ones (list_chats)
        caches.enroll(self._drop)

    async def list_chats(self) -> None:
        """Read which chats have pending confirmations (at open, after another's write)."""
        rows = await self.db.fetch(
            "SELECT DISTINCT channel, chat_id FROM confirmations WHERE state='pending'"
        )
        self._listed.load((r["channel"], r["chat_id"]) for r in rows)

    def _drop(self) -> None:
        if self._quiet is not None:
            self._quiet.clear()
        self._guard.forget_all()
        self._listed.clear()

    async def add(self, row: ConfirmationRow) -> None:
        self._listed.add((row.channel, row.chat_id))
        if self._quiet is None:
            return await self._add(row)
        chat = (row.channel, row.chat_id)
        self._guard.writing(chat)
        self._quiet.pop(chat, None)
        try:
            await self._add(row)
        finally:
            self._guard.written(chat)

    async def _add(self, row: ConfirmationRow) -> None:
        args = json.dumps(row.args)
        await self.db.execute(
            "INSERT INTO confirmations(id, conversation_id, channel, chat_id, user_id, user_name, "
            "tool, call_id, args, args_hash, summary, details, remaining, iteration, state, "
            "reply_to, expires_at, offered, created_at) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            row.id,
            row.conversation_id,
            row.channel,
            row.chat_id,
            row.user_id,
            row.user_name,
            row.tool,
            row.call_id,
            args,
            hashlib.sha256(args.encode()).hexdigest()[:16],
            row.summary,
            row.details,
            json.dumps([[c.id, c.name, c.arguments] for c in row.remaining]),
            row.iteration,
            row.state.value,
            row.reply_to,
            row.expires_at,
            row.offered,
            wall(),
        )

    async def get(self, confirmation_id: str) -> ConfirmationRow | None:
        r = await self.db.fetchrow(f"SELECT {_COLS} FROM confirmations WHERE id=?", confirmation_id)
        return _row(r) if r is not None else None

    async def in_state(
        self, state: ConfirmationState, channel: str | None = None, chat_id: str | None = None
    ) -> list[ConfirmationRow]:
        sql = f"SELECT {_COLS} FROM confirmations WHERE state=?"
        params: tuple[object, ...] = (state.value,)
        if channel is None or chat_id is None:
            return [_row(r) for r in await self.db.fetch(sql + " ORDER BY created_at, id", *params)]
        sql += " AND channel=? AND chat_id=? ORDER BY created_at, id"
        chat = (channel, chat_id)
        quiet = self._quiet if state is ConfirmationState.PENDING else None
        if quiet is None:
            return [_row(r) for r in await self.db.fetch(sql, *params, *chat)]
        if not self._guard.busy(chat) and (self._listed.none(chat) or quiet.use(chat)):
            return []
        mark = self._guard.reading(chat)
        rows = None
        try:
            rows = [_row(r) for r in await self.db.fetch(sql, *params, *chat)]
        finally:
            if self._guard.keeps(chat, mark) and rows == []:
                quiet[chat] = True
        return rows

    async def transition(
        self, confirmation_id: str, from_state: ConfirmationState, to_state: ConfirmationState
    ) -> bool:
        guard("a confirmation", CONFIRMATION_TRANSITIONS, from_state, to_state)
        moved = await self.db.execute(
            "UPDATE confirmations SET state=?, decided_at=? WHERE id=? AND state=?",
            to_state.value,
            wall(),
            confirmation_id,
            from_state.value,
        )
        return moved == 1

    async def set_ref(self, confirmation_id: str, message_ref: str) -> None:
        await self.db.execute(
            "UPDATE confirmations SET message_ref=? WHERE id=?", message_ref, confirmation_id
        )


def _row(r: Row) -> ConfirmationRow:
    return ConfirmationRow(
        id=r["id"],
        conversation_id=r["conversation_id"],
        channel=r["channel"],
        chat_id=r["chat_id"],
        user_id=r["user_id"],
        user_name=r["user_name"],
        tool=r["tool"],
        call_id=r["call_id"],
        args=json.loads(r["args"]),
        summary=r["summary"],
        details=r["details"],
        remaining=[ToolCall(*c) for c in json.loads(r["remaining"])],
        iteration=r["iteration"],
        state=ConfirmationState(r["state"]),
        message_ref=r["message_ref"],
        reply_to=r["reply_to"],
        expires_at=r["expires_at"],
        offered=r["offered"],
    )
