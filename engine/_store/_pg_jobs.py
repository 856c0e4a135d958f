"""Background jobs in PostgreSQL: started, finished, told to their chat, or cut off.

Each job records the instance running it (``jobs.instance``): when that instance dies, the one
that takes its place resumes or reports exactly its jobs (engine/work/_cluster.py), never another
live instance's.
"""

from __future__ import annotations

import json
import time
from typing import Any

from engine._store._pg_db import PgDb
from engine._store._records import JOB_TRANSITIONS, Conversation, JobRow, JobState, allowed
from engine._store._sqlite_jobs import _COLS, _row


class PgJobs:
    def __init__(self, db: PgDb) -> None:
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
        added = await self.db.execute(
            "INSERT INTO jobs(id, conversation_id, channel, chat_id, user_id, tool, args, "
            "resumable, created_at, instance) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10) "
            "ON CONFLICT (id) DO NOTHING",
            job_id,
            conversation.id,
            conversation.channel,
            conversation.chat_id,
            user_id,
            tool,
            json.dumps(args),
            resumable,
            time.time(),
            self.db.incarnation,
        )
        return added == 1

    async def get(self, job_id: str) -> JobRow | None:
        r = await self.db.fetchrow(f"SELECT {_COLS} FROM jobs WHERE id=$1", job_id)
        return _row(r) if r is not None else None

    async def in_state(self, state: JobState) -> list[JobRow]:
        rows = await self.db.fetch(
            f"SELECT {_COLS} FROM jobs WHERE state=$1 ORDER BY created_at", state.value
        )
        return [_row(r) for r in rows]

    async def finish(self, job_id: str, result: str, for_user: str | None, is_error: bool) -> bool:
        done = await self.db.execute(
            "UPDATE jobs SET state='done', result=$1, for_user=$2, is_error=$3, finished_at=$4 "
            "WHERE id=$5 AND state IN ('running', 'resumed')",
            result,
            for_user,
            is_error,
            time.time(),
            job_id,
        )
        return done == 1

    async def transition(self, job_id: str, from_state: JobState, to_state: JobState) -> bool:
        if not allowed(JOB_TRANSITIONS, from_state, to_state):
            raise ValueError(f"a job cannot go from {from_state} to {to_state}")
        moved = await self.db.execute(
            "UPDATE jobs SET state=$1 WHERE id=$2 AND state=$3",
            to_state.value,
            job_id,
            from_state.value,
        )
        return moved == 1
