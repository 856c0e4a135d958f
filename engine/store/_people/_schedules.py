"""Scheduled tasks, their runs and each user's time zone, for every backend.

A run is recorded, keyed by (schedule, due time), in the same transaction that moves the
schedule's `next_due` past it (:meth:`Schedules.claim`): whatever happens afterwards, a due time
is taken at most once (of several instances' schedulers, exactly one claims it), and a crash
leaves a row saying how far it got.

The scheduler waits on :meth:`Schedules.wait_changed` instead of polling: adding or cancelling a
schedule notifies ``relaybot_schedules`` (every instance of a shared store hears it).
"""

from __future__ import annotations

import asyncio

from engine._clock import wall
from engine.store._db import Db, Row
from engine.store._types._rows import ScheduleRow, ScheduleRun
from engine.store._types._states import RUN_TRANSITIONS, RunState, ScheduleState, guard

CHANGED = "relaybot_schedules"
_COLUMNS = (
    "id, channel, chat_id, user_id, user_name, is_private, task, kind, spec, timezone, "
    "next_due, state, created_at"
)


class Schedules:
    def __init__(self, db: Db) -> None:
        self.db = db
        self._changed = asyncio.Event()
        db.on_notify(CHANGED, lambda _payload: self._changed.set())

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
            "spec, timezone, next_due, created_at) VALUES (?, ?, ?, "
            "COALESCE((SELECT user_name FROM inbox WHERE channel=? AND chat_id=? AND user_id=? "
            "ORDER BY id DESC LIMIT 1), ''), "
            "COALESCE((SELECT is_private FROM conversations WHERE channel=? AND chat_id=? "
            f"ORDER BY id DESC LIMIT 1), TRUE), ?, ?, ?, ?, ?, ?) RETURNING {_COLUMNS}",
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
            wall(),
        )
        await self.changed()
        assert row is not None
        return _schedule(row)

    async def chat_schedules(self, channel: str, chat_id: str) -> list[ScheduleRow]:
        """The chat's active schedules, oldest first."""
        rows = await self.db.fetch(
            f"SELECT {_COLUMNS} FROM schedules WHERE channel=? AND chat_id=? AND state='active' "
            "ORDER BY id",
            channel,
            chat_id,
        )
        return [_schedule(r) for r in rows]

    async def cancel_schedule(self, channel: str, chat_id: str, schedule_id: int) -> bool:
        """Cancel one of the chat's active schedules; False when it has no such schedule."""
        cancelled = await self.db.execute(
            "UPDATE schedules SET state='cancelled', cancelled_at=? "
            "WHERE id=? AND channel=? AND chat_id=? AND state='active'",
            wall(),
            schedule_id,
            channel,
            chat_id,
        )
        await self.changed()
        return cancelled == 1

    async def user_timezone(self, channel: str, user_id: str) -> str | None:
        zone = await self.db.fetchval(
            "SELECT timezone FROM user_settings WHERE channel=? AND user_id=?", channel, user_id
        )
        return None if zone is None else str(zone)

    async def set_user_timezone(self, channel: str, user_id: str, timezone: str) -> None:
        await self.db.execute(
            "INSERT INTO user_settings(channel, user_id, timezone) VALUES (?,?,?) "
            "ON CONFLICT (channel, user_id) DO UPDATE SET timezone=excluded.timezone",
            channel,
            user_id,
            timezone,
        )

    # -- what the scheduler uses ------------------------------------------------------------

    async def get(self, schedule_id: int) -> ScheduleRow | None:
        row = await self.db.fetchrow(f"SELECT {_COLUMNS} FROM schedules WHERE id=?", schedule_id)
        return _schedule(row) if row is not None else None

    async def due(self, until: float) -> list[ScheduleRow]:
        """Active schedules whose next run is due at or before `until`, earliest first."""
        rows = await self.db.fetch(
            f"SELECT {_COLUMNS} FROM schedules WHERE state='active' AND next_due <= ? "
            "ORDER BY next_due, id",
            until,
        )
        return [_schedule(r) for r in rows]

    async def next_due(self) -> float | None:
        due = await self.db.fetchval("SELECT MIN(next_due) FROM schedules WHERE state='active'")
        return None if due is None else float(due)

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
                moved = await self.db.execute(
                    "UPDATE schedules SET next_due=? WHERE id=? AND next_due=? AND state='active' "
                    "AND NOT EXISTS (SELECT 1 FROM schedule_runs WHERE schedule_id=? AND due=?)",
                    next_due,
                    schedule_id,
                    expected,
                    schedule_id,
                    run.due,
                )
                if moved != 1:
                    return False
                recorded = await self.db.execute(
                    "INSERT INTO schedule_runs(schedule_id, due, state, missed, error, created_at) "
                    "VALUES (?,?,?,?,?,?) ON CONFLICT DO NOTHING",
                    schedule_id,
                    run.due,
                    run.state.value,
                    run.missed,
                    run.error,
                    wall(),
                )
                if recorded != 1:  # this due time was recorded before: never twice
                    raise _Taken
        except _Taken:
            return False
        return True

    async def runs(self, state: RunState) -> list[ScheduleRun]:
        rows = await self.db.fetch(
            "SELECT schedule_id, due, state, missed, error FROM schedule_runs WHERE state=? "
            "ORDER BY due, schedule_id",
            state.value,
        )
        return [_run(r) for r in rows]

    async def run(self, schedule_id: int, due: float) -> ScheduleRun | None:
        row = await self.db.fetchrow(
            "SELECT schedule_id, due, state, missed, error FROM schedule_runs "
            "WHERE schedule_id=? AND due=?",
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
        """Move a run atomically; False if it was not in `from_state`. Raises ValueError for a
        transition the table (engine/store/_records.py) does not list."""
        guard("a scheduled run", RUN_TRANSITIONS, from_state, to_state)
        moved = await self.db.execute(
            "UPDATE schedule_runs SET state=?, error=COALESCE(?, error), finished_at=? "
            "WHERE schedule_id=? AND due=? AND state=?",
            to_state.value,
            error,
            wall(),
            schedule_id,
            due,
            from_state.value,
        )
        return moved == 1

    async def changed(self) -> None:
        """Wake every scheduler: schedules were added, cancelled or deleted."""
        await self.db.notify(CHANGED)

    async def wait_changed(self) -> None:
        """Return once a schedule was added or cancelled (by any instance) since the last call."""
        await self._changed.wait()
        self._changed.clear()


class _Taken(Exception):
    """Raised inside claim's transaction to roll it back."""


def _schedule(row: Row) -> ScheduleRow:
    fields = dict(row)
    fields["is_private"] = bool(fields["is_private"])
    fields["state"] = ScheduleState(fields["state"])
    return ScheduleRow(**fields)


def _run(row: Row) -> ScheduleRun:
    fields = dict(row)
    fields["state"] = RunState(fields["state"])
    return ScheduleRun(**fields)
