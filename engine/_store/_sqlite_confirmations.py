"""Confirmations in SQLite: destructive calls waiting for, or carrying, their requester's answer."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time

from engine._store._records import (
    CONFIRMATION_TRANSITIONS,
    ConfirmationRow,
    ConfirmationState,
    allowed,
)
from engine._store._sqlite_db import SqliteDb
from engine.models import ToolCall

_COLS = (
    "id, conversation_id, channel, chat_id, user_id, user_name, tool, call_id, args, summary, "
    "details, remaining, iteration, state, message_ref, reply_to, expires_at, offered"
)


class SqliteConfirmations:
    def __init__(self, db: SqliteDb) -> None:
        self.db = db

    async def add(self, row: ConfirmationRow) -> None:
        args = json.dumps(row.args)
        await self.db.write(
            "INSERT INTO confirmations(id, conversation_id, channel, chat_id, user_id, user_name, "
            "tool, call_id, args, args_hash, summary, details, remaining, iteration, state, "
            "reply_to, expires_at, offered, created_at) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
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
            ),
        )

    async def get(self, confirmation_id: str) -> ConfirmationRow | None:
        r = await self.db.one(f"SELECT {_COLS} FROM confirmations WHERE id=?", (confirmation_id,))
        return _row(r) if r is not None else None

    async def in_state(
        self, state: ConfirmationState, channel: str | None = None, chat_id: str | None = None
    ) -> list[ConfirmationRow]:
        sql = f"SELECT {_COLS} FROM confirmations WHERE state=?"
        params: tuple[object, ...] = (state.value,)
        if channel is not None:
            sql += " AND channel=? AND chat_id=?"
            params += (channel, chat_id)
        return [_row(r) for r in await self.db.all(sql + " ORDER BY rowid", params)]

    async def transition(
        self, confirmation_id: str, from_state: ConfirmationState, to_state: ConfirmationState
    ) -> bool:
        if not allowed(CONFIRMATION_TRANSITIONS, from_state, to_state):
            raise ValueError(f"a confirmation cannot go from {from_state} to {to_state}")
        cur = await self.db.write(
            "UPDATE confirmations SET state=?, decided_at=? WHERE id=? AND state=?",
            (to_state.value, time.time(), confirmation_id, from_state.value),
        )
        return cur.rowcount == 1

    async def set_ref(self, confirmation_id: str, message_ref: str) -> None:
        await self.db.write(
            "UPDATE confirmations SET message_ref=? WHERE id=?", (message_ref, confirmation_id)
        )


def _row(r: sqlite3.Row) -> ConfirmationRow:
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
