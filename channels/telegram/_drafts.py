"""Streaming an answer in a private Telegram chat as a draft: sendMessageDraft.

A draft is an ephemeral, animated preview of a message the bot is writing; the answer itself is
then sent once with sendMessage (by the engine's delivery), so a crash mid-answer leaves nothing
half-written: the draft vanishes by itself and recovery sends the stored answer once.

What this relies on, from the Bot API's description of sendMessageDraft and python-telegram-bot
22.8's ``Bot.send_message_draft`` (added in 22.6, open to every bot since 22.7; pyproject asks for
22.6 or later): parameters ``chat_id`` (a private chat), ``draft_id`` (non-zero; changes of the
draft with the same id are animated), ``text`` (0-4096 characters after entities parsing),
``parse_mode`` and ``message_thread_id`` (a topic of the private chat); it returns True, and the
preview lasts about 30 seconds unless renewed. Telegram refuses it outside private chats
("Bad Request: TEXTDRAFT_PEER_INVALID"); a server without the method answers 404, which
python-telegram-bot raises as ``InvalidToken``.

So: drafts are only tried in private chats (a private chat's id is its user's, positive; a group's
is negative), sent as plain text while the answer grows (a part of Markdown does not parse), the
newest 4096 characters of it when it is longer. A chat that refuses one is not asked again; a
server without the method is not asked again at all; either way, and on any other error, the
engine streams that answer by sending and editing a message instead (:meth:`Drafts.show` returns
False or raises).

An answer that will be sent as a rich message (``_rich.wants_rich``: a table, headings, code, a
list of steps) streams as a rich draft, sendRichMessageDraft (Bot API 10.1, through PTB's raw
call), with the newest blocks of what is written so far; a chat that refuses one gets plain
drafts, and a server without the method gets plain drafts everywhere.
"""

from __future__ import annotations

import logging
from collections import OrderedDict

from telegram import Bot
from telegram.error import BadRequest, EndPointNotFound, InvalidToken

from channels.telegram._format import TELEGRAM_LIMIT
from channels.telegram._rich import draft_blocks, wants_rich
from channels.telegram._topics import place

log = logging.getLogger("channels.telegram")

_REFUSED_MAX = 1024  # chats remembered as refusing drafts


class Drafts:
    """Drafts for one bot, and where Telegram said it takes none."""

    def __init__(self, bot: Bot) -> None:
        self.bot = bot
        self.supported = True  # False once the Bot API said it has no sendMessageDraft
        self.rich = True  # False once it said it has no sendRichMessageDraft
        self._refused: OrderedDict[str, None] = OrderedDict()
        self._refused_rich: OrderedDict[str, None] = OrderedDict()

    def may(self, chat_id: str) -> bool:
        """Whether a draft is worth asking for in `chat_id`."""
        chat, _ = place(chat_id)
        private = isinstance(chat, int) and chat > 0
        return self.supported and private and chat_id not in self._refused

    async def show(self, chat_id: str, draft_id: int, text: str) -> bool:
        """`text` as the draft `draft_id` in `chat_id`; False where drafts are not taken."""
        if not self.may(chat_id):
            return False
        chat, topic = place(chat_id)
        if self.rich and chat_id not in self._refused_rich and wants_rich(text):
            try:
                return await self._rich_draft(int(chat), topic, draft_id, text)
            except EndPointNotFound:  # the raw call's word for a 404
                log.info("Telegram: this Bot API server has no rich drafts; plain ones instead")
                self.rich = False
            except BadRequest as exc:
                log.info("Telegram: chat %s takes no rich drafts (%s); plain ones", chat_id, exc)
                _remember(self._refused_rich, chat_id)
        try:
            return bool(
                await self.bot.send_message_draft(
                    int(chat), draft_id, tail(text), message_thread_id=topic
                )
            )
        except InvalidToken:  # the token works (the bot runs): the method is what is not found
            log.info("Telegram: this Bot API server has no message drafts; streaming by edits")
            self.supported = False
        except BadRequest as exc:
            log.info("Telegram: chat %s takes no drafts (%s); streaming by edits", chat_id, exc)
            _remember(self._refused, chat_id)
        return False

    async def _rich_draft(self, chat: int, topic: int | None, draft_id: int, text: str) -> bool:
        params: dict[str, object] = {"chat_id": chat, "draft_id": draft_id}
        if topic is not None:
            params["message_thread_id"] = topic
        params["rich_message"] = {"blocks": draft_blocks(text)}
        return bool(await self.bot.do_api_request("sendRichMessageDraft", params))


def _remember(chats: OrderedDict[str, None], chat_id: str) -> None:
    chats[chat_id] = None
    while len(chats) > _REFUSED_MAX:
        chats.popitem(last=False)


def tail(text: str, limit: int = TELEGRAM_LIMIT) -> str:
    """`text`, or its newest `limit` UTF-16 units (as Telegram counts) after an ellipsis."""
    units = text.encode("utf-16-le")
    if len(units) <= 2 * limit:
        return text
    return "…" + units[-2 * (limit - 1) :].decode("utf-16-le", errors="ignore")
