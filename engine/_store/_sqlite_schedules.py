"""Scheduled tasks, their runs and each user's time zone in SQLite.

A run is recorded, keyed by (schedule, due time), in the same transaction that moves the
schedule's `next_due` past it (:meth:`SqliteSchedules.claim`): whatever happens afterwards, a
due time is taken at most once, and a crash leaves a row saying how far it got.

The scheduler waits on :meth:`SqliteSchedules.wait_changed` instead of polling: every write that
adds or cancels a schedule wakes it (one process owns the store, see bot/_lock.py).
"""

from __future__ import annotations

import asyncio
import sqlite3
import time

from engine._store._records import (
    RUN_TRANSITIONS,
    RunState,
    ScheduleRow,
    ScheduleRun,
    ScheduleState,
    allowed,
)
from engine._store._sqlite_db import SqliteDb

_COLUMNS = (
    "id, channel, chat_id, user_id, user_name, is_private, task, kind, spec, timezone, "
    "next_due, state, created_at"
)


class SqliteSchedules:
    def __init__(self, db: SqliteDb) -> None:
        self.db = db
        self._changed = asyncio.Event()

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
        cur = await self.db.write(
            "INSERT INTO schedules(channel, chat_id, user_id, user_name, is_private, task, kind, "
            "spec, timezone, next_due, created_at) VALUES (?, ?, ?, "
            "COALESCE((SELECT user_name FROM inbox WHERE channel=? AND chat_id=? AND user_id=? "
            "ORDER BY id DESC LIMIT 1), ''), "
            "COALESCE((SELECT is_private FROM conversations WHERE channel=? AND chat_id=? "
            "ORDER BY id DESC LIMIT 1), 1), ?, ?, ?, ?, ?, ?)",
            (
                channel,
                chat_id,
                user_id,
                channel,
                chat_id,
                user_id,
                channel,
                chat_id,
                task,
                kind,
                spec,
                timezone,
                next_due,
                time.time(),
            ),
        )
        self._changed.set()
        row = await self.get(cur.lastrowid or 0)
        assert row is not None
        return row

    async def chat_schedules(self, channel: str, chat_id: str) -> list[ScheduleRow]:
        """The chat's active schedules, oldest first."""
        rows = await self.db.all(
            f"SELECT {_COLUMNS} FROM schedules WHERE channel=? AND chat_id=? AND state='active' "
            "ORDER BY id",
            (channel, chat_id),
        )
        return [_schedule(r) for r in rows]

    async def cancel_schedule(self, channel: str, chat_id: str, schedule_id: int) -> bool:
        """Cancel one of the chat's active schedules; False when it has no such schedule."""
        cur = await self.db.write(
            "UPDATE schedules SET state='cancelled', cancelled_at=? "
            "WHERE id=? AND channel=? AND chat_id=? AND state='active'",
            (time.time(), schedule_id, channel, chat_id),
        )
        self._changed.set()
        return cur.rowcount == 1

    async def user_timezone(self, channel: str, user_id: str) -> str | None:
        row = await self.db.one(
            "SELECT timezone FROM user_settings WHERE channel=? AND user_id=?", (channel, user_id)
        )
        return row["timezone"] if row is not None else None

    async def set_user_timezone(self, channel: str, user_id: str, timezone: str) -> None:
        await self.db.write(
            "INSERT INTO user_settings(channel, user_id, timezone) VALUES (?,?,?) "
            "ON CONFLICT (channel, user_id) DO UPDATE SET timezone=excluded.timezone",
            (channel, user_id, timezone),
        )

    # -- what the scheduler uses ------------------------------------------------------------

    async def get(self, schedule_id: int) -> ScheduleRow | None:
        row = await self.db.one(f"SELECT {_COLUMNS} FROM schedules WHERE id=?", (schedule_id,))
        return _schedule(row) if row is not None else None

    async def due(self, until: float) -> list[ScheduleRow]:
        """Active schedules whose next run is due at or before `until`, earliest first."""
        rows = await self.db.all(
            f"SELECT {_COLUMNS} FROM schedules WHERE state='active' AND next_due <= ? "
            "ORDER BY next_due, id",
            (until,),
        )
        return [_schedule(r) for r in rows]

    async def next_due(self) -> float | None:
        row = await self.db.one("SELECT MIN(next_due) AS t FROM schedules WHERE state='active'")
        return row["t"] if row is not None else None

    async def claim(
        self,
        schedule_id: int,
        expected: float,
        run: ScheduleRun,
        next_due: float,
    ) -> bool:
        """Record `run` and move the schedule's next run from `expected` to `next_due`, in one
        transaction; False (nothing written) when the schedule is no longer active or its next
        run is no longer `expected` (someone claimed it first)."""
        try:
            async with self.db.transaction():
                cur = await self.db.write(
                    "UPDATE schedules SET next_due=? WHERE id=? AND next_due=? AND state='active'",
                    (next_due, schedule_id, expected),
                )
                if cur.rowcount != 1:
                    return False
                try:
                    await self.db.write(
                        "INSERT INTO schedule_runs(schedule_id, due, state, missed, error, "
                        "created_at) VALUES (?,?,?,?,?,?)",
                        (schedule_id, run.due, run.state.value, run.missed, run.error, time.time()),
                    )
                except sqlite3.IntegrityError:  # this due time was recorded before: never twice
                    raise _Taken from None
        except _Taken:
            return False
        return True

    async def runs(self, state: RunState) -> list[ScheduleRun]:
        rows = await self.db.all(
            "SELECT schedule_id, due, state, missed, error FROM schedule_runs WHERE state=? "
            "ORDER BY due, schedule_id",
            (state.value,),
        )
        return [_run(r) for r in rows]

    async def run(self, schedule_id: int, due: float) -> ScheduleRun | None:
        row = await self.db.one(
            "SELECT schedule_id, due, state, missed, error FROM schedule_runs "
            "WHERE schedule_id=? AND due=?",
            (schedule_id, due),
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
        """Move a run atomically; False if it was not in `from_state`. Raises ValueError for a
        transition the table (engine/_store/_records.py) does not list."""
        if not allowed(RUN_TRANSITIONS, from_state, to_state):
            raise ValueError(f"run transition {from_state} -> {to_state} is not allowed")
        cur = await self.db.write(
            "UPDATE schedule_runs SET state=?, error=COALESCE(?, error), finished_at=? "
            "WHERE schedule_id=? AND due=? AND state=?",
            (to_state.value, error, time.time(), schedule_id, due, from_state.value),
        )
        return cur.rowcount == 1

    def changed(self) -> None:
        """Wake the scheduler: schedules were added, cancelled or deleted."""
        self._changed.set()

    async def wait_changed(self) -> None:
        """Return once a schedule was added or cancelled since the last call."""
        await self._changed.wait()
        self._changed.clear()


class _Taken(Exception):
    """Raised inside claim's transaction to roll it back."""


def _schedule(row: sqlite3.Row) -> ScheduleRow:
    fields = dict(row)
    fields["is_private"] = bool(fields["is_private"])
    fields["state"] = ScheduleState(fields["state"])
    return ScheduleRow(**fields)


def _run(row: sqlite3.Row) -> ScheduleRun:
    fields = dict(row)
    fields["state"] = RunState(fields["state"])
    return ScheduleRun(**fields)
