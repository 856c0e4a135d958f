"""`/skill-name args` in a chat: the turn starts with that skill open.

A message that starts with a slash word that is no command of relaybot's (those are handled
before a turn) and names a skill offered in the chat gets, before the model is asked, the
``use_skill`` call the model would have made and its result (the skill's instructions and the
list of its files), recorded in the conversation like any call; the model then answers the
message with the skill before it. A slash word that names no skill is left alone: the message is
an ordinary one. The engine knows only the tool's name; what a skill is stays in tools/skills.
"""

from __future__ import annotations

import json
import re
import secrets

from engine.loop import ToolLoop, TurnContext
from engine.models import TRUSTED, Message, Role, ToolCall, untrusted
from tools import ToolContext

OPENER = "use_skill"
# `/name args`, `/name@bot args` (Telegram's way in a group), `@bot /name args`
_SLASH = re.compile(r"^(?:@\w+\s+)?/([A-Za-z0-9][A-Za-z0-9_.-]{0,127})(?:@\w+)?(?:\s|$)")


def slash_skill(history: list[Message]) -> str | None:
    """The skill name the turn's last message starts with (`/name args`), if any."""
    last = history[-1] if history else None
    if last is None or last.role is not Role.USER or not last.text:
        return None
    found = _SLASH.match(last.text.lstrip())
    return found[1] if found else None


async def open_slash_skill(
    loop: ToolLoop, history: list[Message], ctx: TurnContext
) -> list[Message]:
    """The call and result that open the skill the last message names ([] when it names none,
    or there are no skills); the caller records them and adds them to the history."""
    name = slash_skill(history)
    if name is None or loop.registry.get(OPENER) is None:
        return []
    call = ToolCall(f"slash_{secrets.token_hex(6)}", OPENER, json.dumps({"name": name}))
    key = ctx.key
    tool_ctx = ToolContext(key.channel, key.chat_id, ctx.user_id, ctx.send, call.id, ctx.is_private)
    result = await loop.registry.execute(OPENER, {"name": name}, tool_ctx)
    if result.is_error:
        return []
    source = TRUSTED if result.untrusted is None else untrusted(result.untrusted)
    opened = Message.tool_result(call.id, result.for_llm, provenance=source)
    return [Message.assistant(None, [call]), opened]
