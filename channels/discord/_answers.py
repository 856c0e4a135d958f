"""The engine's answers in Discord: a components-v2 card where the answer has structure, message
content otherwise, kept up to date part by part (``_shown.ShownMessages`` works on
:class:`Answers`). Which answers become cards, and how, is ``_layout``.

A card goes with discord.py's ``LayoutView`` (a ``Container`` of ``TextDisplay`` items with a
``Separator`` between sections), which sets the IS_COMPONENTS_V2 flag and sends no content, as
Discord requires; it carries the same nonce as a text answer would (``_outbox.nonce``, from the
delivery and the card's text), so a restart's second create returns the first message. A card
Discord refuses (400) goes as its Markdown, in as many messages as that takes, each with a nonce
of its own: the answer is never lost, and a refusal creates nothing, so nothing shows twice.
"""

from __future__ import annotations

import logging

import discord

from channels._shown import ShownMessages
from channels.discord._layout import Card, cards, with_tables
from channels.discord._outbox import Outbox, nonce
from channels.discord._outbox import Part as Text
from engine import Untrusted

log = logging.getLogger("channels.discord")

Part = Text | Card


class Answers:
    """Sends and edits of answers; `shown` is what the channel's send/edit use."""

    def __init__(self, outbox: Outbox, remember: int) -> None:
        self._outbox = outbox
        self.shown = ShownMessages[Part](self, remember)

    def render(
        self, text: str, formatted: bool, *, untrusted: Untrusted | None = None
    ) -> list[Part]:
        """Cards where the answer has structure; an answer after untrusted content goes as
        text (its links to hosts nobody in the chat named as code, embeds suppressed)."""
        if untrusted is None and formatted and (found := cards(text)):
            return list(found)
        shown = with_tables(text) if formatted else text
        return list(self._outbox.render(shown, formatted, untrusted=untrusted))

    async def send_part(
        self, chat_id: str, part: Part, reply_to: str | None, *, once: str | None = None
    ) -> str:
        if isinstance(part, Text):
            return await self._outbox.send_part(chat_id, part, reply_to, once=once)
        key = None if once is None else nonce(chat_id, once, part.text)
        try:
            return await self._outbox.send_view(chat_id, layout(part), reply_to, key)
        except discord.HTTPException as exc:
            if exc.status != 400:
                raise
            log.warning("discord: a card was refused in %s (%s); sent as text", chat_id, exc)
        message_id = ""
        for i, text in enumerate(self._outbox.render(part.text, True)):
            again = None if once is None else f"{once}:text:{i}"
            first = reply_to if i == 0 else None
            message_id = await self._outbox.send_part(chat_id, text, first, once=again)
        return message_id

    async def edit_part(self, chat_id: str, message_id: str, part: Part) -> None:
        if isinstance(part, Text):
            await self._outbox.edit_part(chat_id, message_id, part)
            return
        try:
            await self._outbox.edit_view(chat_id, message_id, layout(part))
            return
        except discord.HTTPException as exc:
            if exc.status != 400:
                raise
            log.warning("discord: a card was refused in %s (%s); shown as text", chat_id, exc)
        first, *rest = self._outbox.render(part.text, True)
        await self._outbox.edit_part(chat_id, message_id, first)
        for text in rest:
            await self._outbox.send_part(chat_id, text, None)

    async def delete_part(self, chat_id: str, message_id: str) -> None:
        await self._outbox.delete_part(chat_id, message_id)


def layout(card: Card) -> discord.ui.LayoutView:
    """`card` as a view: one container, a text display per section, separators between."""
    container: discord.ui.Container[discord.ui.LayoutView] = discord.ui.Container()
    for i, section in enumerate(card.sections):
        if i:
            container.add_item(discord.ui.Separator())
        container.add_item(discord.ui.TextDisplay(section))
    view = discord.ui.LayoutView(timeout=None)
    view.add_item(container)
    return view
