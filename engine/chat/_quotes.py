"""Replies: the message a user replied to, shown to the model with theirs.

An adapter hands over what the platform shows of the message replied to (:class:`engine.Quote`:
its author's name, its text or caption, the kinds of what it carried). :func:`quoted` makes it
the block the model reads, marked as a quote with who wrote it, its text cut to ``[engine]
max_quote_chars``. It is kept with the inbox message and then with the user message; the model
is shown it only in the turn that answers that message (engine/context/_prompt.py), so a quote
costs its tokens once and an old one never resurfaces.
"""

from __future__ import annotations

from engine._channel import MediaKind, Quote
from engine.loop import OWN_QUOTE

MAX_AUTHOR = 64  # characters of a display name
_KINDS = {MediaKind.IMAGE: "a picture", MediaKind.AUDIO: "a voice message or audio",
          MediaKind.FILE: "a file"}  # fmt: skip


def quoted(quote: Quote | None, limit: int) -> str | None:
    """The quote block for the model, or None (no quote, or quotes are off: `limit` 0)."""
    if quote is None or limit <= 0:
        return None
    author = " ".join(quote.author.split())[:MAX_AUTHOR] or "someone"
    who = "your own earlier message" if quote.by_bot else f"a message from {author}"
    text = quote.text.strip()
    if len(text) > limit:
        text = text[:limit].rstrip() + " […]"
    lines = [f"{OWN_QUOTE}:]" if quote.by_bot else f"[The user replies to {who}:]"]
    lines += [f"> {line}" if line else ">" for line in text.splitlines()]
    lines += [f"> [{_KINDS[kind]}]" for kind in quote.attachments]
    if len(lines) == 1:
        lines.append("> [a message without text]")
    lines.append("[End of the quoted message]")
    return "\n".join(lines)
