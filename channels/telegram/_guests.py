"""Guests (Bot API 10.0 Guest Mode): someone @mentions the bot in a chat it is not a member of.

Telegram delivers such a mention as ``Update.guest_message``, a Message carrying a
``guest_query_id``; the bot answers with ``answerGuestQuery`` (an InlineQueryResult: here an
article whose content is the answer's text), which Telegram shows in that chat as an inline
message, and an inline message can be edited (a streamed answer grows there).

The conversation of a guest mention is that one mention: the engine's chat id is
``"<chat>/guest:<query id>"`` (:func:`guest_key`), so it never meets the history of any other
chat (Telegram warns that a guest chat's id may coincide with another chat's) and nothing
earlier is sent to the model; what the platform gives with it (a message it replies to) comes
along as with any message. The chat part lets the chat's /settings apply (``engine.chat_of``).
Who asked is the message's sender: pairing, limits and costs are theirs, as everywhere.

One answer per query: what the engine sends first answers it (a refusal, an error, or the
answer); a later send for the same query cannot reach the chat and is logged.
"""

from __future__ import annotations

import dataclasses
import logging
import re

from telegram import Bot, InlineQueryResultArticle, InputTextMessageContent, Message
from telegram.constants import ParseMode
from telegram.error import BadRequest, TelegramError

from channels.telegram._format import render
from engine import InboundMessage, MessageRef

log = logging.getLogger("channels.telegram")

_KEY = re.compile(r"^(?P<chat>-?\d+)/guest:(?P<query>[^/]+)$")
_INLINE = "i:"  # a MessageRef's id for the inline message that answered a guest query


def guest_key(chat_id: int, query_id: str) -> str:
    return f"{chat_id}/guest:{query_id}"


def guest_query_of(chat_key: str) -> str | None:
    """The guest query a chat id of :func:`guest_key` names; None for any other chat."""
    m = _KEY.match(chat_key)
    return m["query"] if m else None


def is_inline(ref: MessageRef) -> bool:
    """Whether `ref` is the inline message that answered a guest query."""
    return ref.message_id.startswith(_INLINE)


def guest_inbound(msg: InboundMessage | None, message: Message) -> InboundMessage | None:
    """The engine's view of a guest mention: its own conversation, addressed to the bot."""
    query = message.guest_query_id
    if msg is None or not query:
        return None
    return dataclasses.replace(
        msg, chat_id=guest_key(message.chat.id, query), is_private=False, mentioned=True
    )


class Guests:
    """Answers to guest queries for one bot."""

    def __init__(self, bot: Bot) -> None:
        self._bot = bot

    async def answer(self, chat_id: str, text: str, formatted: bool = True) -> MessageRef:
        """Answer the guest query `chat_id` names with `text` (its first 4096 characters)."""
        query = guest_query_of(chat_id)
        assert query is not None, chat_id
        body, mode = self._shown(text, formatted)
        result = InlineQueryResultArticle(
            id=query[:64],
            title=body[:64] or "…",
            input_message_content=InputTextMessageContent(body, parse_mode=mode),
        )
        try:
            sent = await self._bot.answer_guest_query(query, result)
        except BadRequest as exc:
            log.warning("telegram: a guest query in %s could not be answered: %s", chat_id, exc)
            raise
        return MessageRef(chat_id, f"{_INLINE}{sent.inline_message_id}")

    async def edit(self, ref: MessageRef, text: str, formatted: bool = True) -> None:
        """Replace the text of the inline message that answered a guest query."""
        body, mode = self._shown(text, formatted)
        inline = ref.message_id.removeprefix(_INLINE)
        try:
            await self._bot.edit_message_text(body, inline_message_id=inline, parse_mode=mode)
        except TelegramError as exc:
            if "not modified" not in str(exc).lower():
                raise

    @staticmethod
    def _shown(text: str, formatted: bool) -> tuple[str, str | None]:
        if not formatted:
            return text[:4096] or "…", None
        parts = render(text)
        return (parts[0] if parts else "…"), ParseMode.HTML
