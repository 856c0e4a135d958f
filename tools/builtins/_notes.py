"""Notes memory per user: remember, recall, forget, over a NotesStore."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Protocol

from pydantic import Field

from tools._base import Tool, ToolContext
from tools._function import tool
from tools._result import ToolResult
from tools.builtins._text import clip

RECALL_LIMIT = 20
RECALL_MAX_CHARS = 6_000


class NotesStore(Protocol):
    """Where notes live (the SQLite store implements it). `owner` is "<channel>:<user id>"."""

    async def add_note(self, owner: str, text: str) -> int:
        """Save a note and return its id."""
        ...

    async def list_notes(
        self, owner: str, query: str | None, limit: int
    ) -> list[tuple[int, str, float]]:
        """(id, text, created unix time) of the owner's notes matching `query` (all when None),
        newest first, at most `limit`."""
        ...

    async def delete_note(self, owner: str, note_id: int) -> bool:
        """Delete one of the owner's notes; False if the owner has no such note."""
        ...


def owner_of(ctx: ToolContext) -> str:
    """Whose notes a call reads and writes: the same user on another platform is another."""
    return f"{ctx.channel}:{ctx.user_id}"


def notes_tools(store: NotesStore | None) -> list[Tool]:
    """remember, recall and forget, each reading and writing only the caller's own notes.
    Without a store (e.g. only listing tools) they exist but every call fails."""

    def notes_of(ctx: ToolContext) -> tuple[NotesStore, str] | ToolResult:
        """(store, owner) for this call, or the error result to give instead."""
        if store is None:
            return ToolResult.fail("Notes are not available (relaybot has no notes store).")
        if not ctx.user_id:
            return ToolResult.fail("Notes need to know who is asking; this message did not say.")
        return store, owner_of(ctx)

    @tool
    async def remember(
        text: Annotated[str, Field(min_length=1, max_length=2000)], ctx: ToolContext
    ) -> ToolResult:
        """Save a note for this user that lasts across conversations (a preference, a fact
        about them, something they ask you to keep). Use it when the user asks you to remember
        something or states a lasting preference.

        Args:
            text: The note, self-contained (e.g. 'Prefers metric units').
        """
        if isinstance(found := notes_of(ctx), ToolResult):
            return found
        notes, owner = found
        note_id = await notes.add_note(owner, text)
        return ToolResult.ok(f"Saved as note #{note_id}.")

    @tool
    async def recall(ctx: ToolContext, query: str | None = None) -> ToolResult:
        """List this user's saved notes, newest first. Use it when the user refers to
        something they told you before, or to check their preferences before answering.

        Args:
            query: Only notes containing this text; all notes when omitted.
        """
        if isinstance(found := notes_of(ctx), ToolResult):
            return found
        notes, owner = found
        rows = await notes.list_notes(owner, query or None, RECALL_LIMIT)
        if not rows:
            return ToolResult.ok("No matching notes." if query else "No notes saved yet.")
        lines = [
            f"#{note_id} ({datetime.fromtimestamp(created, UTC):%Y-%m-%d}): {text}"
            for note_id, text, created in rows
        ]
        if len(rows) == RECALL_LIMIT:
            lines.append(f"(the {RECALL_LIMIT} newest; give a query to find older ones)")
        return ToolResult.ok(clip("\n".join(lines), RECALL_MAX_CHARS))

    @tool(destructive=True, summary="Delete note #{note_id}")
    async def forget(note_id: int, ctx: ToolContext) -> ToolResult:
        """Delete one of this user's saved notes by its number (see recall). Use it when the
        user asks you to forget something or a note is no longer true.

        Args:
            note_id: The note's number, e.g. 12 for note #12.
        """
        if isinstance(found := notes_of(ctx), ToolResult):
            return found
        notes, owner = found
        if await notes.delete_note(owner, note_id):
            return ToolResult.ok(f"Deleted note #{note_id}.")
        return ToolResult.fail(f"There is no note #{note_id} for this user; recall lists them.")

    return [remember, recall, forget]
