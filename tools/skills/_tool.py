"""use_skill: the model opens a skill the request lists, or reads one of its files, a page at a
time; find_skill: the model looks skills up when there are too many to describe in a request."""

from __future__ import annotations

import asyncio
from typing import Annotated

from pydantic import Field

from tools._base import Tool, ToolContext
from tools._function import tool
from tools._result import ToolResult
from tools.skills._front_matter import FrontMatterError
from tools.skills._library import Skill, Skills
from tools.skills._listing import clip, crowded, find
from tools.skills._reading import Refused, instructions, read_file


def skill_tools(skills: Skills) -> list[Tool]:
    """use_skill, and find_skill when the skills do not all fit in a request's listing."""
    everyone = [s for s in skills.skills.values() if not s.unmet]
    found = [use_skill_tool(skills)]
    return found + ([find_skill_tool(skills)] if crowded(everyone, skills.listing_tokens) else [])


async def open_skill(skill: Skill, limit: int, offset: int = 0) -> str:
    """A page of the skill's instructions and the list of its files. Raises Refused, OSError,
    UnicodeDecodeError, FrontMatterError."""
    return await asyncio.to_thread(instructions, skill, limit, offset)


def use_skill_tool(skills: Skills) -> Tool:
    """use_skill over `skills` (offered only when there is at least one)."""

    @tool
    async def use_skill(
        name: Annotated[str, Field(min_length=1, max_length=128)],
        ctx: ToolContext,
        file: Annotated[str | None, Field(max_length=500)] = None,
        offset: Annotated[int, Field(ge=0)] = 0,
    ) -> ToolResult:
        """Open one of the skills listed in your instructions: returns its instructions and
        the list of its files. With file, returns that file of the skill instead. A long text
        comes a page at a time: its end says the offset to read on from.

        Args:
            name: The skill's name, as listed.
            file: A file of the skill, relative to its folder (e.g. 'reference/forms.md').
            offset: Where to read on from (a byte offset a previous page gave).
        """
        skill = skills.get(name, ctx.channel, ctx.chat_id)
        if skill is None:
            names = ", ".join(s.name for s in skills.offered(ctx.channel, ctx.chat_id))
            return ToolResult.fail(f"There is no skill {name!r} here. Skills: {names or 'none'}.")
        limit = skills.max_file_bytes
        source = None if skill.trusted else f"the skill {skill.name}"
        if file is not None:
            try:
                text = await asyncio.to_thread(read_file, skill, file, limit, offset)
                return ToolResult(text, untrusted=source)
            except Refused as exc:
                return ToolResult.fail(f"Not read: {exc}.")
        try:
            return ToolResult(await open_skill(skill, limit, offset), untrusted=source)
        except Refused as exc:
            return ToolResult.fail(f"Not read: {exc}.")
        except (OSError, UnicodeDecodeError, FrontMatterError) as exc:
            return ToolResult.fail(f"The skill {name} cannot be read now: {exc}")

    use_skill.bounded_output = True  # a page is at most [skills] max_file_kb
    return use_skill


def find_skill_tool(skills: Skills) -> Tool:
    """find_skill over `skills` (offered when they do not all fit in a request)."""

    @tool
    async def find_skill(
        query: Annotated[str, Field(min_length=1, max_length=300)], ctx: ToolContext
    ) -> ToolResult:
        """Find the skills that match a request, with their descriptions (there are more
        skills than your instructions describe). Then open one with use_skill.

        Args:
            query: A few words of what the user wants, e.g. 'fill a pdf form'.
        """
        found = find(skills.offered(ctx.channel, ctx.chat_id), query)
        if not found:
            return ToolResult.ok(f"No skill matches {query!r}; try other words.")
        return ToolResult.ok("\n".join(f"- {s.name}: {clip(s.description)}" for s in found))

    return find_skill
