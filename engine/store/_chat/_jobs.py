"""Background jobs, for every backend: started, finished, told to their chat, or cut off.

In a store several instances share, each job records the instance running it (``jobs.instance``,
this process's incarnation): when that instance dies, the one taking its place resumes or
reports exactly its jobs (engine/work/_cluster.py), never another live instance's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from engine._clock import wall
from engine.store._db import Db, Row
from engine.store._types._rows import Conversation, JobRow
from engine.store._types._states import JOB_TRANSITIONS, JobState, guard

_COLS = (
    "id, conversation_id, channel, chat_id, user_id, tool, args, resumable, state, result, "
    "for_user, is_error, resume, untrusted, "
    "(SELECT is_private FROM conversations c WHERE c.id = jobs.conversation_id) AS is_private"
)
_ADD = (
    "INSERT INTO jobs(id, conversation_id, channel, chat_id, user_id, tool, args, resumable, "
    "created_at{cols}) VALUES (?,?,?,?,?,?,?,?,?{marks}) ON CONFLICT (id) DO NOTHING"
)


@dataclass(slots=True)
class Incarnation:
    """This process's row of ``instances`` in a shared store: set by the cluster when it joins
    (engine/store/postgres/_cluster.py), read by the jobs it starts. None: one process alone, or
    not joined yet."""

    id: int | None = None


class Jobs:
    def __init__(self, db: Db, incarnation: Incarnation) -> None:
        self.db = db
        self.incarnation = incarnation

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
        row = (
            job_id,
            conversation.id,
            conversation.channel,
            conversation.chat_id,
            user_id,
            tool,
            json.dumps(args),
            resumable,
            wall(),
        )
        instance = self.incarnation.id
        if instance is None:  # no instance runs it (one process, or not joined)
            return await self.db.execute(_ADD.format(cols="", marks=""), *row) == 1
        added = await self.db.execute(_ADD.format(cols=", instance", marks=",?"), *row, instance)
        return added == 1

    async def get(self, job_id: str) -> JobRow | None:
        r = await self.db.fetchrow(f"SELECT {_COLS} FROM jobs WHERE id=?", job_id)
        return _row(r) if r is not None else None

    async def in_state(self, state: JobState) -> list[JobRow]:
        rows = await self.db.fetch(
            f"SELECT {_COLS} FROM jobs WHERE state=? ORDER BY created_at, id", state.value
        )
        return [_row(r) for r in rows]

    async def finish(
        self,
        job_id: str,
        result: str,
        for_user: str | None,
        is_error: bool,
        untrusted: str | None = None,
    ) -> bool:
        done = await self.db.execute(
            "UPDATE jobs SET state='done', result=?, for_user=?, is_error=?, untrusted=?, "
            "finished_at=? WHERE id=? AND state IN ('running', 'resumed')",
            result,
            for_user,
            is_error,
            untrusted,
            wall(),
            job_id,
        )
        return done == 1

    async def set_resume(self, job_id: str, resume: str) -> bool:
        kept = await self.db.execute(
            "UPDATE jobs SET resume=? WHERE id=? AND state IN ('running', 'resumed')",
            resume,
            job_id,
        )
        return kept == 1

    async def transition(self, job_id: str, from_state: JobState, to_state: JobState) -> bool:
        guard("a job", JOB_TRANSITIONS, from_state, to_state)
        moved = await self.db.execute(
            "UPDATE jobs SET state=? WHERE id=? AND state=?",
            to_state.value,
            job_id,
            from_state.value,
        )
        return moved == 1


def _row(r: Row) -> JobRow:
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
        is_private=bool(r["is_private"]),
        resume=r["resume"],
        untrusted=r["untrusted"],
    )
