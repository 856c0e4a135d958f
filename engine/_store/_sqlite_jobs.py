"""Background jobs in SQLite: started, finished, told to their chat, or cut off."""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any

from engine._store._records import JOB_TRANSITIONS, Conversation, JobRow, JobState, allowed
from engine._store._sqlite_db import SqliteDb

_COLS = (
    "id, conversation_id, channel, chat_id, user_id, tool, args, resumable, state, result, "
    "for_user, is_error"
)


class SqliteJobs:
    def __init__(self, db: SqliteDb) -> None:
        self.db = db

    async def add(
        self,
        conversation: Conversation,
        job_id: str,
        user_id: str,
        tool: str,
        args: dict[str, Any],
        *,
        resumable: bool,
    ) -> bool:
        cur = await self.db.write(
            "INSERT INTO jobs(id, conversation_id, channel, chat_id, user_id, tool, args, "
            "resumable, created_at) VALUES (?,?,?,?,?,?,?,?,?) ON CONFLICT (id) DO NOTHING",
            (
                job_id,
                conversation.id,
                conversation.channel,
                conversation.chat_id,
                user_id,
                tool,
                json.dumps(args),
                int(resumable),
                time.time(),
            ),
        )
        return cur.rowcount == 1

    async def get(self, job_id: str) -> JobRow | None:
        r = await self.db.one(f"SELECT {_COLS} FROM jobs WHERE id=?", (job_id,))
        return _row(r) if r is not None else None

    async def in_state(self, state: JobState) -> list[JobRow]:
        rows = await self.db.all(
            f"SELECT {_COLS} FROM jobs WHERE state=? ORDER BY created_at", (state.value,)
        )
        return [_row(r) for r in rows]

    async def finish(self, job_id: str, result: str, for_user: str | None, is_error: bool) -> bool:
        cur = await self.db.write(
            "UPDATE jobs SET state='done', result=?, for_user=?, is_error=?, finished_at=? "
            "WHERE id=? AND state IN ('running', 'resumed')",
            (result, for_user, int(is_error), time.time(), job_id),
        )
        return cur.rowcount == 1

    async def transition(self, job_id: str, from_state: JobState, to_state: JobState) -> bool:
        if not allowed(JOB_TRANSITIONS, from_state, to_state):
            raise ValueError(f"a job cannot go from {from_state} to {to_state}")
        cur = await self.db.write(
            "UPDATE jobs SET state=? WHERE id=? AND state=?",
            (to_state.value, job_id, from_state.value),
        )
        return cur.rowcount == 1


def _row(r: sqlite3.Row) -> JobRow:
    return JobRow(
        id=r["id"],
        conversation_id=r["conversation_id"],
        channel=r["channel"],
        chat_id=r["chat_id"],
        user_id=r["user_id"],
        tool=r["tool"],
        args=json.loads(r["args"]),
        resumable=bool(r["resumable"]),
        state=JobState(r["state"]),
        result=r["result"],
        for_user=r["for_user"],
        is_error=bool(r["is_error"]),
    )
