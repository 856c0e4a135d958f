"""send_message: post to the current chat while a long task is still running."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from tools._base import ToolContext
from tools._function import tool
from tools._result import ToolResult


@tool
async def send_message(
    text: Annotated[str, Field(min_length=1, max_length=4000)], ctx: ToolContext
) -> ToolResult:
    """Post a message in the current chat right away, before your final answer. Use it only
    for progress on long multi-step work (e.g. "Reading the three reports, one moment"), never
    for the answer itself.

    Args:
        text: The message to post.
    """
    await ctx.send(text)
    return ToolResult.quiet("Posted.")
