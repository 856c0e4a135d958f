"""The store as the tools and the chat settings see it: standing permissions, usage, memory,
scheduled tasks and each chat's settings. One protocol per part (see ``_api``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from engine.store._people._access import AccessRequest, ApprovedUser
from engine.store._people._memory import MemoryItem
from engine.store._types._rows import (
    ChatPrefs,
    Grant,
    ScheduleRow,
    ScheduleRun,
    Spent,
    UsageTotals,
    UserDay,
)
from engine.store._types._states import RunState


class GrantStore(Protocol):
    """Standing permissions: a tool that runs without asking in one chat."""

    async def grant(
        self, channel: str, chat_id: str, tool: str, user_id: str, user_name: str
    ) -> None: ...

    async def in_chat(self, channel: str, chat_id: str) -> list[Grant]: ...

    async def revoke(self, channel: str, chat_id: str, tool: str | None = None) -> int: ...


class SealedStore(Protocol):
    """An MCP server's OAuth tokens and client registration, as sealed (encrypted) text."""

    async def get(self, server: str, kind: str) -> str | None: ...

    async def put(self, server: str, kind: str, sealed: str) -> None: ...


class AccessStore(Protocol):
    """Pairing: strangers' requests and the people owners let in
    (engine/store/_people/_access.py)."""

    async def is_approved(self, channel: str, user_id: str) -> bool: ...

    def on_change(self, listener: Callable[[], object]) -> None:
        """Call `listener` when who is approved may have changed, by any process."""
        ...

    async def approved(self) -> list[ApprovedUser]: ...

    async def approve(self, channel: str, user_id: str, user_name: str, by: str) -> bool: ...

    async def revoke(self, channel: str, user_id: str) -> bool: ...

    async def ask(self, request: AccessRequest) -> bool:
        """Record a pending request; False when the person has one pending already."""
        ...

    async def latest(self, channel: str, user_id: str) -> AccessRequest | None: ...

    async def request(self, code: str) -> AccessRequest | None: ...

    async def waiting(self, now: float) -> list[AccessRequest]:
        """Pending and not expired at `now`, oldest first."""
        ...

    async def asked_since(self, since: float) -> int: ...

    async def decide(self, code: str, allow: bool, by: str, now: float) -> AccessRequest | None:
        """Answer a pending request (allowing approves the person); None if not pending."""
        ...


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

    async def by_user_day(self, since_day: str) -> list[UserDay]:
        """Each user's tokens and cost per day from `since_day` on (the console's chart)."""
        ...


class MemoryStore(Protocol):
    """Short facts kept about a user or a group (tools.builtins.MemoryBook;
    engine/store/_people/_memory.py says what an owner is and what "used" means)."""

    async def add(self, owner: str, text: str) -> int: ...

    async def items(
        self, owner: str, query: str | None = None, limit: int = 50
    ) -> list[MemoryItem]: ...

    async def touch(self, owner: str, ids: Sequence[int]) -> None: ...

    async def delete(self, owner: str, item_id: int) -> bool: ...

    async def clear(self, owner: str) -> int: ...


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
