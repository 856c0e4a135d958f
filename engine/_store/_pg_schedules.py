"""Scheduled tasks, their runs and each user's time zone in PostgreSQL.

As in SQLite (``_sqlite_schedules``), a run is recorded, keyed by (schedule, due time), in the
same transaction that moves the schedule's `next_due` past it, so of several instances'
schedulers exactly one claims a due time. Adding or cancelling a schedule notifies every
instance (``relaybot_schedules``), so each scheduler wakes as it does in one process.
"""

from __future__ import annotations

import asyncio
import time

from engine._store._pg_db import PgDb
from engine._store._records import RUN_TRANSITIONS, RunState, ScheduleRow, ScheduleRun, allowed
from engine._store._sqlite_schedules import _COLUMNS, _run, _schedule

CHANGED = "relaybot_schedules"


class PgSchedules:
    def __init__(self, db: PgDb) -> None:
        self.db = db
        self._changed = asyncio.Event()
        db.on_notify(CHANGED, lambda _payload: self._changed.set())

    async def _notify(self) -> None:
        self._changed.set()
        await self.db.execute(f"NOTIFY {CHANGED}")

    async def changed(self) -> None:
        """Wake every instance's scheduler: schedules were deleted (a user forgotten)."""
        await self._notify()

    # -- what the tools use (tools.builtins.ScheduleBook) ----------------------------------

    async def add_schedule(
        self,
        channel: str,
        chat_id: str,
        user_id: str,
        task: str,
        kind: str,
        spec: str,
        timezone: str,
        next_due: float,
    ) -> ScheduleRow:
        """Store an active schedule. Whether the chat is private and the user's name come from
        the chat's own records (its latest conversation, the user's latest message there)."""
        row = await self.db.fetchrow(
            "INSERT INTO schedules(channel, chat_id, user_id, user_name, is_private, task, kind, "
            "spec, timezone, next_due, created_at) VALUES ($1, $2, $3, "
            "COALESCE((SELECT user_name FROM inbox WHERE channel=$1 AND chat_id=$2 AND user_id=$3 "
            "ORDER BY id DESC LIMIT 1), ''), "
            "COALESCE((SELECT is_private FROM conversations WHERE channel=$1 AND chat_id=$2 "
            f"ORDER BY id DESC LIMIT 1), TRUE), $4, $5, $6, $7, $8, $9) RETURNING {_COLUMNS}",
            channel,
            chat_id,
            user_id,
            task,
            kind,
            spec,
            timezone,
            next_due,
            time.time(),
        )
        await self._notify()
        assert row is not None
        return _schedule(row)

    async def chat_schedules(self, channel: str, chat_id: str) -> list[ScheduleRow]:
        rows = await self.db.fetch(
            f"SELECT {_COLUMNS} FROM schedules WHERE channel=$1 AND chat_id=$2 "
            "AND state='active' ORDER BY id",
            channel,
            chat_id,
        )
        return [_schedule(r) for r in rows]

    async def cancel_schedule(self, channel: str, chat_id: str, schedule_id: int) -> bool:
        cancelled = await self.db.execute(
            "UPDATE schedules SET state='cancelled', cancelled_at=$1 "
            "WHERE id=$2 AND channel=$3 AND chat_id=$4 AND state='active'",
            time.time(),
            schedule_id,
            channel,
            chat_id,
        )
        await self._notify()
        return cancelled == 1

    async def user_timezone(self, channel: str, user_id: str) -> str | None:
        return await self.db.fetchval(
            "SELECT timezone FROM user_settings WHERE channel=$1 AND user_id=$2", channel, user_id
        )

    async def set_user_timezone(self, channel: str, user_id: str, timezone: str) -> None:
        await self.db.execute(
            "INSERT INTO user_settings(channel, user_id, timezone) VALUES ($1,$2,$3) "
            "ON CONFLICT (channel, user_id) DO UPDATE SET timezone=excluded.timezone",
            channel,
            user_id,
            timezone,
        )

    # -- what the scheduler uses ------------------------------------------------------------

    async def get(self, schedule_id: int) -> ScheduleRow | None:
        row = await self.db.fetchrow(f"SELECT {_COLUMNS} FROM schedules WHERE id=$1", schedule_id)
        return _schedule(row) if row is not None else None

    async def due(self, until: float) -> list[ScheduleRow]:
        rows = await self.db.fetch(
            f"SELECT {_COLUMNS} FROM schedules WHERE state='active' AND next_due <= $1 "
            "ORDER BY next_due, id",
            until,
        )
        return [_schedule(r) for r in rows]

    async def next_due(self) -> float | None:
        return await self.db.fetchval("SELECT MIN(next_due) FROM schedules WHERE state='active'")

    async def claim(
        self, schedule_id: int, expected: float, run: ScheduleRun, next_due: float
    ) -> bool:
        """Record `run` and move the schedule's next run from `expected` to `next_due` in one
        statement; False (nothing written) when it is no longer active at `expected`, or
        that due time was recorded before."""
        claimed = await self.db.fetchval(
            "WITH s AS (UPDATE schedules SET next_due=$1 WHERE id=$2 AND next_due=$3 "
            "AND state='active' AND NOT EXISTS (SELECT 1 FROM schedule_runs "
            "WHERE schedule_id=$2 AND due=$4) RETURNING id) "
            "INSERT INTO schedule_runs(schedule_id, due, state, missed, error, created_at) "
            "SELECT id, $4, $5, $6, $7, $8 FROM s ON CONFLICT DO NOTHING RETURNING 1",
            next_due,
            schedule_id,
            expected,
            run.due,
            run.state.value,
            run.missed,
            run.error,
            time.time(),
        )
        return claimed == 1

    async def runs(self, state: RunState) -> list[ScheduleRun]:
        rows = await self.db.fetch(
            "SELECT schedule_id, due, state, missed, error FROM schedule_runs WHERE state=$1 "
            "ORDER BY due, schedule_id",
            state.value,
        )
        return [_run(r) for r in rows]

    async def run(self, schedule_id: int, due: float) -> ScheduleRun | None:
        row = await self.db.fetchrow(
            "SELECT schedule_id, due, state, missed, error FROM schedule_runs "
            "WHERE schedule_id=$1 AND due=$2",
            schedule_id,
            due,
        )
        return _run(row) if row is not None else None

    async def transition(
        self,
        schedule_id: int,
        due: float,
        from_state: RunState,
        to_state: RunState,
        error: str | None = None,
    ) -> bool:
        if not allowed(RUN_TRANSITIONS, from_state, to_state):
            raise ValueError(f"run transition {from_state} -> {to_state} is not allowed")
        moved = await self.db.execute(
            "UPDATE schedule_runs SET state=$1, error=COALESCE($2, error), finished_at=$3 "
            "WHERE schedule_id=$4 AND due=$5 AND state=$6",
            to_state.value,
            error,
            time.time(),
            schedule_id,
            due,
            from_state.value,
        )
        return moved == 1

    async def wait_changed(self) -> None:
        """Return once a schedule was added or cancelled (by any instance) since the last call."""
        await self._changed.wait()
        self._changed.clear()
