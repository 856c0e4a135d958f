"""Confirmations in PostgreSQL: destructive calls waiting for, or carrying, their requester's
answer. A transition is one conditional UPDATE, so of two instances seeing the same press, one
moves the row and the other is told it was decided already. Rows are read back by the SQLite
backend's helper (by column name, so an asyncpg Record reads as a sqlite3.Row does)."""

from __future__ import annotations

import hashlib
import json
import time

from engine._store._pg_db import PgDb
from engine._store._records import (
    CONFIRMATION_TRANSITIONS,
    ConfirmationRow,
    ConfirmationState,
    allowed,
)
from engine._store._sqlite_confirmations import _row

_COLS = (
    "id, conversation_id, channel, chat_id, user_id, user_name, tool, call_id, args, summary, "
    "details, remaining, iteration, state, message_ref, reply_to, expires_at, offered"
)


class PgConfirmations:
    def __init__(self, db: PgDb) -> None:
        self.db = db

    async def add(self, row: ConfirmationRow) -> None:
        args = json.dumps(row.args)
        await self.db.execute(
            "INSERT INTO confirmations(id, conversation_id, channel, chat_id, user_id, user_name, "
            "tool, call_id, args, args_hash, summary, details, remaining, iteration, state, "
            "reply_to, expires_at, offered, created_at) "
            "VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$18,$19)",
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
            time.time(),
        )

    async def get(self, confirmation_id: str) -> ConfirmationRow | None:
        r = await self.db.fetchrow(
            f"SELECT {_COLS} FROM confirmations WHERE id=$1", confirmation_id
        )
        return _row(r) if r is not None else None

    async def in_state(
        self, state: ConfirmationState, channel: str | None = None, chat_id: str | None = None
    ) -> list[ConfirmationRow]:
        sql = f"SELECT {_COLS} FROM confirmations WHERE state=$1"
        params: tuple[object, ...] = (state.value,)
        if channel is not None:
            sql += " AND channel=$2 AND chat_id=$3"
            params += (channel, chat_id)
        rows = await self.db.fetch(sql + " ORDER BY created_at, id", *params)
        return [_row(r) for r in rows]

    async def transition(
        self, confirmation_id: str, from_state: ConfirmationState, to_state: ConfirmationState
    ) -> bool:
        if not allowed(CONFIRMATION_TRANSITIONS, from_state, to_state):
            raise ValueError(f"a confirmation cannot go from {from_state} to {to_state}")
        moved = await self.db.execute(
            "UPDATE confirmations SET state=$1, decided_at=$2 WHERE id=$3 AND state=$4",
            to_state.value,
            time.time(),
            confirmation_id,
            from_state.value,
        )
        return moved == 1

    async def set_ref(self, confirmation_id: str, message_ref: str) -> None:
        await self.db.execute(
            "UPDATE confirmations SET message_ref=$1 WHERE id=$2", message_ref, confirmation_id
        )
