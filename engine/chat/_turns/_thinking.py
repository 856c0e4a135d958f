"""What the model thought, shown before its answer where a chat asked for it (/settings
thinking on; off by default, so no one is shown a model's thoughts unasked).

Shown short: the reasoning of a whole turn can run to pages, so the view is its first
:data:`VIEW_CHARS` characters (cut at a word), folded away as the platform can
(:meth:`engine.Channel.send_thoughts`: an expandable quotation, a spoiler, dimmed text). Showing
it never holds up or fails the answer.
"""

from __future__ import annotations

import logging

from engine._channel import Channel
from engine.chat._settings._chat import ChatSettings
from engine.loop import ConversationKey

log = logging.getLogger(__name__)

VIEW_CHARS = 1500


def brief(thoughts: str, limit: int = VIEW_CHARS) -> str:
    """The first `limit` characters of `thoughts`, cut at a word, "…" when cut."""
    text = thoughts.strip()
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(maxsplit=1)[0] if " " in text[:limit] else text[:limit]
    return cut.rstrip() + " …"


async def show_thoughts(
    settings: ChatSettings | None,
    channel: Channel,
    key: ConversationKey,
    thoughts: str,
    reply_to: str | None,
) -> None:
    """Send the view of `thoughts` when the chat asked for it; never raises."""
    if settings is None or not thoughts or not settings.of(key).thinking:
        return
    try:
        await channel.send_thoughts(key.chat_id, brief(thoughts), reply_to=reply_to)
    except Exception as exc:
        log.warning("could not show the model's thinking in %s: %s", key, exc)
