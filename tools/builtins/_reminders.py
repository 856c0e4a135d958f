"""remind_me: a resumable background job that posts the reminder in the chat it came from."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from tools._base import Tool
from tools._errors import ToolRetry
from tools._result import ToolResult

MAX_AHEAD = timedelta(days=366)


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

    def validate(self, args: dict[str, Any]) -> dict[str, Any]:
        super().validate(args)
        if (args.get("in_seconds") is None) == (args.get("at") is None):
            raise ToolRetry("Give exactly one of in_seconds (a delay) or at (a date and time).")
        due = due_time(args)
        if due - datetime.now(UTC) > MAX_AHEAD:
            raise ToolRetry("Reminders can be set at most one year ahead.")
        return args

    def job_args(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"text": args["text"], "at": due_time(args).isoformat()}

    def describe_call(self, args: dict[str, Any]) -> str:
        due = due_time(args)
        return f"Reminder at {due:%Y-%m-%d %H:%M} UTC: {args['text']}"

    async def execute(self, args: dict[str, Any]) -> ToolResult:
        due = due_time(args)
        left = (due - datetime.now(UTC)).total_seconds()
        if left > 0:
            await asyncio.sleep(left)  # a timer; the engine re-runs the job after a restart
        late = left < -60
        note = f" (due {due:%Y-%m-%d %H:%M} UTC; sent late)" if late else ""
        return ToolResult.user(f"⏰ Reminder: {args['text']}{note}")


def due_time(args: dict[str, Any]) -> datetime:
    """When the reminder in `args` is due, as an aware UTC datetime."""
    at = args.get("at")
    if at is None:
        return datetime.now(UTC) + timedelta(seconds=float(args["in_seconds"]))
    try:
        due = datetime.fromisoformat(str(at).strip().replace("Z", "+00:00"))
    except ValueError:
        raise ToolRetry(
            f"Cannot read the time {at!r}; use ISO 8601 like '2025-03-01T09:00:00+01:00'."
        ) from None
    if due.tzinfo is None:
        due = due.replace(tzinfo=UTC)
    return due.astimezone(UTC)
