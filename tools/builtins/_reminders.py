"""remind_me: a resumable background job that posts the reminder in the chat it came from.

It tells the time by a :class:`WallClock` it is given (the daemon passes its own clock, tests
one they move by hand), never by reading the system clock itself.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from tools._base import Tool
from tools._result import ToolResult
from tools.errors import ToolRetry

MAX_AHEAD = timedelta(days=366)
MAX_NAP_S = 60.0


class WallClock(Protocol):
    """Unix time and a wait for a moment of it (engine.Clock has this shape)."""

    def now(self) -> float: ...

    async def sleep_until(self, t: float) -> None:
        """Return at unix time `t`, or earlier: the caller looks at `now` again."""
        ...


class SystemWallClock:
    """The system's clock; a wait is cut into naps so a jump of the clock is noticed."""

    def now(self) -> float:
        return time.time()

    async def sleep_until(self, t: float) -> None:
        await asyncio.sleep(min(max(t - time.time(), 0.0), MAX_NAP_S))


class RemindMe(Tool):
    """Waits until the reminder is due, then returns it for the user.

    The engine runs it as a background job and stores `job_args` (with an absolute `at`), so a
    job re-run after a restart waits for the same moment; one already due fires at once.
    """

    name = "remind_me"
    description = (
        "Set a reminder: at the given time the text is posted in this chat, even if the bot "
        "restarts meanwhile. Give either in_seconds (a delay from now) or at (a date and "
        "time). Use current_time first when you need today's date or the user's local time."
    )
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "text": {
                "type": "string",
                "minLength": 1,
                "maxLength": 1000,
                "description": "The reminder, addressed to the user (e.g. 'Call the dentist').",
            },
            "in_seconds": {
                "type": "number",
                "minimum": 0,
                "maximum": MAX_AHEAD.total_seconds(),
                "description": "Delay from now in seconds (e.g. 600 for ten minutes).",
            },
            "at": {
                "type": "string",
                "description": "ISO 8601 date and time with a UTC offset, e.g. "
                "'2025-03-01T09:00:00+01:00'. Without an offset it is read as UTC.",
            },
        },
        "required": ["text"],
        "additionalProperties": False,
    }
    background = True
    resumable = True
    timeout_s = MAX_AHEAD.total_seconds() + 3600

    def __init__(self, clock: WallClock | None = None) -> None:
        self.clock: WallClock = clock or SystemWallClock()

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self.clock.now(), UTC)

    def validate(self, args: dict[str, Any]) -> dict[str, Any]:
        super().validate(args)
        if (args.get("in_seconds") is None) == (args.get("at") is None):
            raise ToolRetry("Give exactly one of in_seconds (a delay) or at (a date and time).")
        due = due_time(args, self._now())
        if due - self._now() > MAX_AHEAD:
            raise ToolRetry("Reminders can be set at most one year ahead.")
        return args

    def job_args(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"text": args["text"], "at": due_time(args, self._now()).isoformat()}

    def describe_call(self, args: dict[str, Any]) -> str:
        due = due_time(args, self._now())
        return f"Reminder at {due:%Y-%m-%d %H:%M} UTC: {args['text']}"

    async def execute(self, args: dict[str, Any]) -> ToolResult:
        due = due_time(args, self._now())
        late = (self._now() - due).total_seconds() > 60
        while self._now() < due:  # a timer; the engine re-runs the job after a restart
            await self.clock.sleep_until(due.timestamp())
        note = f" (due {due:%Y-%m-%d %H:%M} UTC; sent late)" if late else ""
        return ToolResult.user(f"⏰ Reminder: {args['text']}{note}")


def due_time(args: dict[str, Any], now: datetime) -> datetime:
    """When the reminder in `args` is due, as an aware UTC datetime (`in_seconds` from `now`)."""
    at = args.get("at")
    if at is None:
        return now + timedelta(seconds=float(args["in_seconds"]))
    try:
        due = datetime.fromisoformat(str(at).strip().replace("Z", "+00:00"))
    except ValueError:
        raise ToolRetry(
            f"Cannot read the time {at!r}; use ISO 8601 like '2025-03-01T09:00:00+01:00'."
        ) from None
    if due.tzinfo is None:
        due = due.replace(tzinfo=UTC)
    return due.astimezone(UTC)
