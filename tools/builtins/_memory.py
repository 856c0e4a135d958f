"""Memory per user: remember, recall, forget, over a MemoryBook.

In a private chat the tools read and write the user's own memory. In a group they read and write
the group's memory, never a member's: a message injected into a group cannot make the model read
out what someone keeps in private. Only the bot's admins change a group's memory. What is kept is
put into the system prompt of later turns by the engine (engine/chat/_turns/_memory.py), so the
model knows it without a call; recall finds older items and marks them used.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Protocol

from pydantic import Field

from tools._base import Tool, ToolContext
from tools._function import tool
from tools._result import ToolResult
from tools.builtins._text import clip

RECALL_LIMIT = 20
RECALL_MAX_CHARS = 6_000
MAX_TEXT = 2_000  # characters of one item


class MemoryItemView(Protocol):
    """One remembered fact as the tools read it."""

    @property
    def id(self) -> int: ...
    @property
    def text(self) -> str: ...
    @property
    def created_at(self) -> float: ...


class MemoryBook(Protocol):
    """Where memory lives (the store implements it; engine/store/_people/_memory.py)."""

    async def add(self, owner: str, text: str) -> int: ...

    async def items(
        self, owner: str, query: str | None = None, limit: int = 50
    ) -> Sequence[MemoryItemView]: ...

    async def touch(self, owner: str, ids: Sequence[int]) -> None: ...

    async def delete(self, owner: str, item_id: int) -> bool: ...

    async def clear(self, owner: str) -> int: ...


def _nobody(channel: str, user_id: str) -> bool:
    return False


@dataclass(frozen=True, slots=True)
class MemoryAccess:
    """What the memory tools are given: the book, and who may change a group's memory."""

    book: MemoryBook
    is_admin: Callable[[str, str], bool] = _nobody  # (channel, user id)


def user_owner(channel: str, user_id: str) -> str:
    """Whose memory a person's is: the same user on another platform is another person."""
    return f"{channel}:{user_id}"


def group_owner(channel: str, chat_id: str) -> str:
    """A group's own memory (no user id contains ":chat:", so it never meets a person's)."""
    return f"{channel}:chat:{chat_id}"


def owner_of(ctx: ToolContext) -> str:
    """The memory a call reads: the user's in a private chat, the group's in a group."""
    if ctx.is_private:
        return user_owner(ctx.channel, ctx.user_id)
    return group_owner(ctx.channel, ctx.chat_id)


def memory_tools(memory: MemoryAccess | MemoryBook | None) -> list[Tool]:
    """remember, recall and forget over the memory of the chat each call is made in (see the
    module's docstring). Without a book (e.g. only listing tools) they exist but every call
    fails."""
    access = memory if isinstance(memory, MemoryAccess | None) else MemoryAccess(memory)

    def book_of(ctx: ToolContext, *, writes: bool) -> tuple[MemoryBook, str] | ToolResult:
        """(book, owner) for this call, or the error result to give instead."""
        if access is None:
            return ToolResult.fail("Notes are not available (relaybot has no notes store).")
        if not ctx.user_id:
            return ToolResult.fail("Notes need to know who is asking; this message did not say.")
        if writes and not ctx.is_private and not access.is_admin(ctx.channel, ctx.user_id):
            return ToolResult.fail(
                "In a group only the bot's admins change what it remembers for the group; "
                "a personal note is saved in a private chat with the bot."
            )
        return access.book, owner_of(ctx)

    @tool
    async def remember(
        text: Annotated[str, Field(min_length=1, max_length=MAX_TEXT)], ctx: ToolContext
    ) -> ToolResult:
        """Save a note for this user that lasts across conversations (a preference, a fact
        about them, something they ask you to keep). Use it when the user asks you to remember
        something or states a lasting preference.

        Args:
            text: The note, self-contained (e.g. 'Prefers metric units').
        """
        if isinstance(found := book_of(ctx, writes=True), ToolResult):
            return found
        book, owner = found
        item_id = await book.add(owner, " ".join(text.split()))
        return ToolResult.ok(f"Saved as note #{item_id}.")

    @tool
    async def recall(ctx: ToolContext, query: str | None = None) -> ToolResult:
        """List this user's saved notes, newest first. Use it when the user refers to
        something they told you before, or to check their preferences before answering.

        Args:
            query: Only notes containing this text; all notes when omitted.
        """
        if isinstance(found := book_of(ctx, writes=False), ToolResult):
            return found
        book, owner = found
        rows = await book.items(owner, query or None, RECALL_LIMIT)
        if not rows:
            return ToolResult.ok("No matching notes." if query else "No notes saved yet.")
        await book.touch(owner, [r.id for r in rows])
        lines = [
            f"#{r.id} ({datetime.fromtimestamp(r.created_at, UTC):%Y-%m-%d}): {r.text}"
            for r in rows
        ]
        if len(rows) == RECALL_LIMIT:
            lines.append(f"(the {RECALL_LIMIT} most recent; give a query to find older ones)")
        return ToolResult.ok(clip("\n".join(lines), RECALL_MAX_CHARS))

    @tool(destructive=True, summary="Delete note #{note_id}")
    async def forget(note_id: int, ctx: ToolContext) -> ToolResult:
        """Delete one of this user's saved notes by its number (see recall). Use it when the
        user asks you to forget something or a note is no longer true.

        Args:
            note_id: The note's number, e.g. 12 for note #12.
        """
        if isinstance(found := book_of(ctx, writes=True), ToolResult):
            return found
        book, owner = found
        if await book.delete(owner, note_id):
            return ToolResult.ok(f"Deleted note #{note_id}.")
        return ToolResult.fail(f"There is no note #{note_id} here; recall lists them.")

    return [remember, recall, forget]
