"""What a turn is run with: one tool loop (the model, the models a chat may choose, the tool
registry) and the prompt parts that go with those tools (the skills offered).

A reload (bot/_reload.py) builds a new :class:`Tooling` and puts it in force through
:class:`engine.chat.Live`; a turn takes the one in force when it starts and keeps it to its end
(a confirmation's resumed turn is a new turn), so no turn sees its model or its tools change
under it. Whoever built the one replaced closes what it holds (its MCP servers, its model
clients) once the last turn using it has ended: :meth:`Tooling.idle`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Sequence
from typing import Protocol

from engine.loop import ToolLoop


class PromptPart(Protocol):
    """Something a turn's system prompt carries for its chat and user (what is remembered, the
    skills offered): "" adds nothing, so a request without any stays byte for byte the same."""

    async def prompt(self, channel: str, chat_id: str, user_id: str, is_private: bool) -> str: ...


class Tooling:
    """One loop and its prompt parts, counted while turns use them."""

    def __init__(self, loop: ToolLoop, parts: Sequence[PromptPart] = ()) -> None:
        self.loop = loop
        self.parts = tuple(parts)
        self._users = 0
        self._idle = asyncio.Event()
        self._idle.set()

    @property
    def in_use(self) -> int:
        """Turns running with it now."""
        return self._users

    @contextlib.contextmanager
    def use(self) -> Iterator[ToolLoop]:
        """For the length of one turn."""
        self._users += 1
        self._idle.clear()
        try:
            yield self.loop
        finally:
            self._users -= 1
            if not self._users:
                self._idle.set()

    async def idle(self) -> None:
        """Returns once no turn uses it (at once when none does)."""
        await self._idle.wait()
