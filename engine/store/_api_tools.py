"""The store as the tools and the chat settings see it: standing permissions, usage, notes,
scheduled tasks and each chat's settings. One protocol per part (see ``_api``)."""

from __future__ import annotations

from typing import Protocol

from engine.store._rows import ChatPrefs, Grant, ScheduleRow, ScheduleRun, Spent, UsageTotals
from engine.store._states import RunState


class GrantStore(Protocol):
    """Standing permissions: a tool that runs without asking in one chat."""

    async def grant(
        self, channel: str, chat_id: str, tool: str, user_id: str, user_name: str
    ) -> None: ...

    async def in_chat(self, channel: str, chat_id: str) -> list[Grant]: ...

    async def revoke(self, channel: str, chat_id: str, tool: str | None = None) -> int: ...


class UsageStore(Protocol):
    """What each user spent, per day (UTC, "YYYY-MM-DD")."""

    async def add(
        self,
        channel: str,
        user_id: str,
        day: str,
        prompt_tokens: int,
        completion_tokens: int,
        tool_calls: int,
    ) -> None:
        """Add one turn's figures."""
        ...

    async def totals(self, channel: str, user_id: str, day_prefix: str) -> UsageTotals: ...

    async def top(self, channel: str, day_prefix: str, limit: int = 5) -> list[UsageTotals]: ...


class SpendStore(Protocol):
    """What requests cost, per chat, user, day (UTC, "YYYY-MM-DD") and model."""

    async def add(
        self, channel: str, chat_id: str, user_id: str, day: str, model: str, spent: Spent
    ) -> None:
        """Add one request's figures to the day's row (`spent.of` is not used)."""
        ...

    async def of_user(self, channel: str, user_id: str, day_prefix: str) -> Spent: ...

    async def of_chat(self, channel: str, chat_id: str, day_prefix: str) -> Spent: ...

    async def by_model(self, day_prefix: str) -> list[Spent]:
        """Each model's figures (`of`: its name), the costliest first."""
        ...


class NoteStore(Protocol):
    """The notes tools' store (tools.builtins.NotesStore). `owner` is "<channel>:<user id>"."""

    async def add_note(self, owner: str, text: str) -> int: ...

    async def list_notes(
        self, owner: str, query: str | None = None, limit: int = 20
    ) -> list[tuple[int, str, float]]: ...

    async def delete_note(self, owner: str, note_id: int) -> bool: ...


class ScheduleStore(Protocol):
    """Scheduled tasks: the tools' side (tools.builtins.ScheduleBook) and the scheduler's."""

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
    ) -> ScheduleRow: ...

    async def chat_schedules(self, channel: str, chat_id: str) -> list[ScheduleRow]: ...

    async def cancel_schedule(self, channel: str, chat_id: str, schedule_id: int) -> bool: ...

    async def user_timezone(self, channel: str, user_id: str) -> str | None: ...

    async def set_user_timezone(self, channel: str, user_id: str, timezone: str) -> None: ...

    async def get(self, schedule_id: int) -> ScheduleRow | None: ...

    async def due(self, until: float) -> list[ScheduleRow]: ...

    async def next_due(self) -> float | None: ...

    async def claim(
        self, schedule_id: int, expected: float, run: ScheduleRun, next_due: float
    ) -> bool:
        """Record `run` and move the schedule's next run from `expected` to `next_due`
        atomically; False when it was not active at `expected`, or that run exists."""
        ...

    async def runs(self, state: RunState) -> list[ScheduleRun]: ...

    async def run(self, schedule_id: int, due: float) -> ScheduleRun | None: ...

    async def transition(
        self,
        schedule_id: int,
        due: float,
        from_state: RunState,
        to_state: RunState,
        error: str | None = None,
    ) -> bool: ...

    async def wait_changed(self) -> None:
        """Return once a schedule was added or cancelled since the last call."""
        ...


class ChatSettingsStore(Protocol):
    """Each chat's own settings (/settings)."""

    async def all(self) -> list[ChatPrefs]: ...

    async def save(self, prefs: ChatPrefs, user_id: str) -> None: ...
