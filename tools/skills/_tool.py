"""use_skill: the model opens a skill the request lists, or reads one of its files."""

from __future__ import annotations

import asyncio
from typing import Annotated

from pydantic import Field

from tools._base import Tool, ToolContext
from tools._function import tool
from tools._result import ToolResult
from tools.skills._front_matter import FrontMatterError
from tools.skills._library import Refused, Skills, instructions, read_file


def use_skill_tool(skills: Skills) -> Tool:
    """use_skill over `skills` (offered only when there is at least one)."""

    @tool
    async def use_skill(
        name: Annotated[str, Field(min_length=1, max_length=64)],
        ctx: ToolContext,
        file: Annotated[str | None, Field(max_length=500)] = None,
    ) -> ToolResult:
        """Open one of the skills listed in your instructions: returns its instructions and
        the list of its files. With file, returns that file of the skill instead.

        Args:
            name: The skill's name, as listed.
            file: A file of the skill, relative to its folder (e.g. 'reference/forms.md').
        """
        skill = skills.get(name, ctx.channel, ctx.chat_id)
        if skill is None:
            names = ", ".join(s.name for s in skills.offered(ctx.channel, ctx.chat_id))
            return ToolResult.fail(f"There is no skill {name!r} here. Skills: {names or 'none'}.")
        limit = skills.max_file_bytes
        if file is not None:
            try:
                text, size = await asyncio.to_thread(read_file, skill, file, limit)
            except Refused as exc:
                return ToolResult.fail(f"Not read: {exc}.")
            cut = f"\n[… cut: the file has {size:,} bytes, the first {limit:,} are shown]"
            return ToolResult.ok(text + (cut if size > limit else ""))
        try:
            body, files = await asyncio.to_thread(instructions, skill, limit)
        except (OSError, UnicodeDecodeError, FrontMatterError) as exc:
            return ToolResult.fail(f"The skill {name} cannot be read now: {exc}")
        listed = "\n".join(f"- {f}" for f in files) or "(none)"
        return ToolResult.ok(
            f"Skill {skill.name} (its folder: {skill.folder}).\n\n{body}\n\n"
            f"Files of this skill (read one with use_skill and file):\n{listed}"
        )

    return use_skill
