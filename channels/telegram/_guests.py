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

One answer per query: what the engine sends first answers it (a refusal, an error, the answer,
or a confirmation with its buttons); what it sends later for the same query replaces that
message's text (the answer after a confirmation, say). A press on a confirmation there comes
back from the inline message, which names no chat: this process remembers whose it is, so after
a restart such a confirmation can no longer be answered and expires. A confirmation whose
action is too long to show goes without buttons (an inline answer carries no file): it expires.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections import OrderedDict

from telegram import (
    Bot,
    InlineKeyboardMarkup,
    InlineQueryResultArticle,
    InputTextMessageContent,
    Message,
)
from telegram.constants import ParseMode
from telegram.error import BadRequest, TelegramError

from channels.telegram._format import html_to_plain, render
from engine import InboundMessage, MessageRef

log = logging.getLogger("channels.telegram")

_KEY = re.compile(r"^(?P<chat>-?\d+)/guest:(?P<query>[^/]+)$")
_INLINE = "i:"  # a MessageRef's id for the inline message that answered a guest query
_REMEMBERED = 1024  # guest queries whose answer this process remembers


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
    """Answers to guest queries for one bot. This process remembers which inline message
    answered which query (the newest :data:`_REMEMBERED`): a later send for the same query
    replaces that message's text, and a press on its buttons finds its conversation."""

    def __init__(self, bot: Bot) -> None:
        self._bot = bot
        self._inline: OrderedDict[str, str] = OrderedDict()  # query id → inline_message_id
        self._chats: OrderedDict[str, str] = OrderedDict()  # inline_message_id → chat key
        self._prompts: set[str] = set()  # inline messages that show a confirmation now

    def chat_of(self, inline_message_id: str) -> str | None:
        """The conversation whose answer is the inline message `inline_message_id`."""
        return self._chats.get(inline_message_id)

    async def answer(
        self,
        chat_id: str,
        text: str,
        formatted: bool = True,
        markup: InlineKeyboardMarkup | None = None,
    ) -> MessageRef:
        """Answer the guest query `chat_id` names with `text` (its first 4096 characters); a
        query answered already has its answer's text replaced."""
        body, mode = self._shown(text, formatted)
        ref = await self.show(chat_id, body, mode, markup)
        self._prompts.discard(ref.message_id.removeprefix(_INLINE))  # the prompt is replaced
        return ref

    async def show(
        self, chat_id: str, body: str, mode: str | None, markup: InlineKeyboardMarkup | None
    ) -> MessageRef:
        """`body` (in `mode`) as the answer to the guest query `chat_id` names (a confirmation
        prompt, with its buttons, when called directly)."""
        query = guest_query_of(chat_id)
        assert query is not None, chat_id
        if (inline := self._inline.get(query)) is not None:
            ref = MessageRef(chat_id, f"{_INLINE}{inline}")
            await self._replace(ref, body, mode, markup)
            if markup is not None:
                self._prompts.add(inline)
            return ref
        result = InlineQueryResultArticle(
            id=query[:64],
            title=html_to_plain(body)[:64] if mode else body[:64],
            input_message_content=InputTextMessageContent(body, parse_mode=mode),
            reply_markup=markup,
        )
        try:
            sent = await self._bot.answer_guest_query(query, result)
        except BadRequest as exc:
            log.warning("telegram: a guest query in %s could not be answered: %s", chat_id, exc)
            raise
        inline = sent.inline_message_id
        if markup is not None:
            self._prompts.add(inline)
        self._remember(self._inline, query, inline)
        self._remember(self._chats, inline, chat_id)
        return MessageRef(chat_id, f"{_INLINE}{inline}")

    async def close_prompt(self, ref: MessageRef, text: str) -> None:
        """A confirmation's final status, its buttons gone, unless what came after it (the
        answer) replaced it already: one message shows one thing, the latest."""
        inline = ref.message_id.removeprefix(_INLINE)
        if inline in self._prompts:
            await self.edit(ref, text)

    async def edit(
        self,
        ref: MessageRef,
        text: str,
        formatted: bool = True,
        markup: InlineKeyboardMarkup | None = None,
    ) -> None:
        """Replace the text of the inline message that answered a guest query (its buttons:
        `markup`, none by default)."""
        body, mode = self._shown(text, formatted)
        await self._replace(ref, body, mode, markup)

    async def _replace(
        self, ref: MessageRef, body: str, mode: str | None, markup: InlineKeyboardMarkup | None
    ) -> None:
        inline = ref.message_id.removeprefix(_INLINE)
        try:
            await self._bot.edit_message_text(
                body, inline_message_id=inline, parse_mode=mode, reply_markup=markup
            )
        except TelegramError as exc:
            if "not modified" not in str(exc).lower():
                raise

    def _remember(self, kept: OrderedDict[str, str], key: str, value: str) -> None:
        kept[key] = value
        while len(kept) > _REMEMBERED:
            _, gone = kept.popitem(last=False)
            self._prompts.discard(gone)

    @staticmethod
    def _shown(text: str, formatted: bool) -> tuple[str, str | None]:
        if not formatted:
            return text[:4096] or "…", None
        parts = render(text)
        return (parts[0] if parts else "…"), ParseMode.HTML
