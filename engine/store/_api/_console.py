"""The store as the web console sees it: sign-in links and sessions (:class:`ConsoleStore`),
and what it reads across the whole store (:class:`BrowseStore`). One protocol per part (see
``_api``)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol

from engine.store._operate._browse import (
    Activity,
    ConfirmationView,
    ConversationView,
    ScheduleView,
    StoredMessage,
)
from engine.store._operate._console import ConsoleSession
from engine.store._types._rows import Grant


class ConsoleStore(Protocol):
    """One-time sign-in links and the sessions they open; only tokens' hashes are stored."""

    async def new_link(self, admin: str, ttl_s: float, role: str = "admin") -> str: ...

    async def redeem(self, token: str, session_s: float) -> tuple[str, ConsoleSession] | None:
        """Use a link once, before it expires: (the session's token, the session)."""
        ...

    async def session(self, token: str) -> ConsoleSession | None: ...

    async def usable(self, token: str) -> bool:
        """Whether a link would sign in now; nothing changes."""
        ...

    async def end_others(self, owners: Collection[str]) -> int:
        """End the open sessions of all but `owners` (and the server's own, ``cli``)."""
        ...

    async def end(self, token: str) -> bool: ...


class BrowseStore(Protocol):
    """Reads across every chat and instance, for the console."""

    async def conversations(
        self,
        *,
        chat_id: str | None = None,
        user_id: str | None = None,
        since: float | None = None,
        until: float | None = None,
        limit: int = 50,
    ) -> list[ConversationView]: ...

    async def conversation(self, conversation_id: int) -> ConversationView | None: ...

    async def messages(self, conversation_id: int, limit: int = 500) -> list[StoredMessage]: ...

    async def confirmations(self, conversation_id: int) -> list[ConfirmationView]: ...

    async def grants(self) -> list[Grant]: ...

    async def schedules(self) -> list[ScheduleView]: ...

    async def activity(self, since: float) -> Activity: ...
