"""Scheduled tasks: schedule_task, list_schedules and cancel_schedule, over a ScheduleBook.

The tools check and store; the engine's scheduler (engine/chat/_jobs/_schedules.py) runs each task
at its
time as a request of the user who scheduled it, in the chat it was scheduled in. A user's time
zone is asked for once (the tool tells the model to ask) and remembered for the next schedules.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Literal, Protocol

from pydantic import Field

from tools._base import Tool, ToolContext
from tools._function import tool
from tools._result import ToolResult
from tools.builtins._recurrence import CRON, BadRecurrence, Recurrence, duration, zone
from tools.errors import ToolRetry

Weekday = Literal["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
_DAYS: tuple[str, ...] = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")  # cron numbers them so
ASK_ZONE = (
    "The user's time zone is not known yet. Ask the user where they are (a city, or a time "
    "zone), then call schedule_task again with timezone set to its IANA name (e.g. "
    "'Europe/Berlin'); it is remembered for their later schedules."
)


class ScheduleView(Protocol):
    """A stored schedule as the tools read it."""

    @property
    def id(self) -> int: ...
    @property
    def task(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def spec(self) -> str: ...
    @property
    def timezone(self) -> str: ...
    @property
    def next_due(self) -> float: ...
    @property
    def user_name(self) -> str: ...


class ScheduleBook(Protocol):
    """Where schedules live (the SQLite store implements it)."""

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
    ) -> ScheduleView: ...

    async def chat_schedules(self, channel: str, chat_id: str) -> Sequence[ScheduleView]: ...

    async def cancel_schedule(self, channel: str, chat_id: str, schedule_id: int) -> bool: ...

    async def user_timezone(self, channel: str, user_id: str) -> str | None: ...

    async def set_user_timezone(self, channel: str, user_id: str, timezone: str) -> None: ...


@dataclass(frozen=True, slots=True)
class ScheduleAccess:
    """What the schedule tools are given: the book, the limits, and the clock."""

    book: ScheduleBook
    max_per_chat: int = 10
    min_interval_s: float = 300.0
    now: Callable[[], float] = field(default=time.time)


def recurrence_of(row: ScheduleView) -> Recurrence:
    return Recurrence(row.kind, row.spec, row.timezone)


def describe_schedule(row: ScheduleView) -> str:
    """One line per schedule: "#3: Tell me the time — Every 1 minute; next: Mon ... (by Ann)"."""
    when = recurrence_of(row)
    by = f" (by {row.user_name})" if row.user_name else ""
    return f"#{row.id}: {row.task} — {when.describe()}; next: {when.local_time(row.next_due)}{by}"


def schedule_tools(access: ScheduleAccess | None) -> list[Tool]:
    """schedule_task, list_schedules and cancel_schedule for the chat of each call. Without
    access (e.g. only listing tools) they exist but every call fails."""

    def book_of(ctx: ToolContext) -> ScheduleAccess | ToolResult:
        if access is None:
            return ToolResult.fail("Scheduled tasks are not available (relaybot has no store).")
        if not (ctx.chat_id and ctx.user_id):
            return ToolResult.fail("Scheduling needs to know the chat and the user; unknown here.")
        return access

    @tool
    async def schedule_task(
        task: Annotated[str, Field(min_length=1, max_length=1000)],
        ctx: ToolContext,
        cron: str | None = None,
        every_minutes: Annotated[int | None, Field(ge=1, le=525_600)] = None,
        at: Annotated[str | None, Field(pattern=r"^\d{1,2}:\d{2}$")] = None,
        weekdays: list[Weekday] | None = None,
        timezone: str | None = None,
    ) -> ToolResult:
        """Schedule a recurring task in this chat: at each time, the task is done as if the
        user asked for it then, and the answer is posted here. Give exactly one of cron,
        every_minutes, or at (with weekdays). For a one-off reminder use remind_me instead.

        Args:
            task: What to do at each run, as a request in plain words, e.g. 'Tell me the
                weather in Paris and my notes for today'.
            cron: A five-field cron expression (minute hour day month weekday) in the user's
                time zone, e.g. '0 8 * * 1-5' for weekdays at 8:00.
            every_minutes: Run every this many minutes, starting that long from now.
            at: A time of day, 'HH:MM' (24-hour), in the user's time zone.
            weekdays: With at: the days to run on; every day when omitted.
            timezone: The user's IANA time zone (e.g. 'Europe/Berlin'). Needed once for cron or
                at; it is remembered for the user.
        """
        if isinstance(found := book_of(ctx), ToolResult):
            return found
        given = [x for x in (cron, every_minutes, at) if x is not None]
        if len(given) != 1:
            raise ToolRetry("Give exactly one of cron, every_minutes or at.")
        if weekdays and at is None:
            raise ToolRetry("weekdays goes with at; for cron, put the days in the expression.")
        book = found.book
        try:
            if timezone is not None:
                timezone = zone(timezone).key
                await book.set_user_timezone(ctx.channel, ctx.user_id, timezone)
            known = timezone or await book.user_timezone(ctx.channel, ctx.user_id)
            if every_minutes is not None:
                when = Recurrence.every(every_minutes * 60, known or "UTC")
            elif known is None:
                raise ToolRetry(ASK_ZONE)
            elif cron is not None:
                when = Recurrence.cron(cron, known)
            else:
                assert at is not None
                days = [_DAYS.index(d) for d in weekdays or []]
                when = Recurrence.daily(at, days, known)
        except BadRecurrence as exc:
            raise ToolRetry(f"{exc}.") from None
        now = found.now()
        gap = when.shortest_gap(now)
        if gap < found.min_interval_s:
            raise ToolRetry(
                f"That would run every {duration(gap)}; the shortest interval allowed here is "
                f"{duration(found.min_interval_s)}. Ask the user for a less frequent schedule."
            )
        existing = await book.chat_schedules(ctx.channel, ctx.chat_id)
        if len(existing) >= found.max_per_chat:
            return ToolResult.fail(
                f"This chat already has {len(existing)} scheduled tasks, the most allowed. "
                "Cancel one first (list_schedules shows them)."
            )
        row = await book.add_schedule(
            ctx.channel,
            ctx.chat_id,
            ctx.user_id,
            task,
            when.kind,
            when.spec,
            when.timezone,
            when.first_after(now),
        )
        zone_note = "" if when.kind == CRON or timezone else " (times shown in UTC)"
        return ToolResult.ok(
            f"Scheduled task #{row.id}: {when.describe()}; first run "
            f"{when.local_time(row.next_due)}{zone_note}. /schedules lists and cancels it."
        )

    @tool
    async def list_schedules(ctx: ToolContext) -> ToolResult:
        """List the scheduled tasks of this chat, with their numbers and next run times."""
        if isinstance(found := book_of(ctx), ToolResult):
            return found
        rows = await found.book.chat_schedules(ctx.channel, ctx.chat_id)
        if not rows:
            return ToolResult.ok("No scheduled tasks in this chat.")
        return ToolResult.ok("\n".join(describe_schedule(r) for r in rows))

    @tool
    async def cancel_schedule(schedule_id: int, ctx: ToolContext) -> ToolResult:
        """Cancel one of this chat's scheduled tasks by its number (see list_schedules).

        Args:
            schedule_id: The task's number, e.g. 3 for #3.
        """
        if isinstance(found := book_of(ctx), ToolResult):
            return found
        if await found.book.cancel_schedule(ctx.channel, ctx.chat_id, schedule_id):
            return ToolResult.ok(f"Cancelled scheduled task #{schedule_id}.")
        return ToolResult.fail(
            f"There is no scheduled task #{schedule_id} in this chat; list_schedules shows them."
        )

    return [schedule_task, list_schedules, cancel_schedule]
