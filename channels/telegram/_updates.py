"""Telegram updates as the engine sees them, decided without side effects: the engine's
:class:`InboundMessage` of a message, whether it is addressed to the bot (PTB filters), and an
update read from the Bot API's JSON so that one odd update cannot wedge the rest. Both ways
updates arrive (``_polling``, ``_webhook``) read them here."""

from __future__ import annotations

import logging
from collections.abc import Callable

from telegram import Bot, Message, MessageEntity, Update
from telegram.constants import ChatType
from telegram.ext import filters

from channels.telegram._media import attachments_of
from channels.telegram._topics import key_of, replied_to
from engine import InboundMessage, Quote

log = logging.getLogger("channels.telegram")

ALLOWED_UPDATES = [Update.MESSAGE, Update.CALLBACK_QUERY]
TOKEN_REJECTED = (
    "Telegram rejected the bot token (401): check [telegram] token_env (or token) and the token"
    " @BotFather gave you; retrying with backoff, up to %gs apart"
)


def inbound_message(message: Message | None) -> InboundMessage | None:
    """The engine's view of a Telegram message (None for messages without a sender)."""
    if message is None or message.from_user is None:
        return None
    user = message.from_user
    reply = replied_to(message)
    return InboundMessage(
        channel="telegram",
        chat_id=key_of(message),
        user_id=str(user.id),
        user_name=user.full_name or user.username or str(user.id),
        username=user.username,
        text=message.text or message.caption or "",
        message_id=str(message.message_id),
        is_private=message.chat.type == ChatType.PRIVATE,
        mentioned=addressed_to_bot(message),
        reply_to=str(reply.message_id) if reply is not None else None,
        attachments=attachments_of(message),
        group_id=message.media_group_id,
        quote=quote_of(message, reply),
        language=user.language_code,
        forwarded_from=forwarded_from(message),
    )


def forwarded_from(message: Message) -> str | None:
    """Who wrote a forwarded message (a name: the user's, the hidden user's, the chat's)."""
    origin = message.forward_origin
    if origin is None:
        return None
    user = getattr(origin, "sender_user", None)
    chat = getattr(origin, "sender_chat", None) or getattr(origin, "chat", None)
    name = (user.full_name if user is not None else None) or getattr(
        origin, "sender_user_name", None
    )
    return name or (chat.title if chat is not None else None) or "someone"


def quote_of(message: Message, reply: Message | None) -> Quote | None:
    """What `message` replies to: the part the user quoted (Telegram's reply quote), else the
    replied message's text or caption, with the kinds of what it carried."""
    if reply is None:
        return None
    sender = reply.from_user
    if sender is not None:
        author = sender.full_name or sender.username or "someone"
    else:
        author = reply.sender_chat.title if reply.sender_chat and reply.sender_chat.title else ""
    by_bot = sender is not None and sender.id == message.get_bot().id
    picked = message.quote.text if message.quote is not None else None
    text = picked or reply.text or reply.caption or ""
    kinds = tuple(a.kind for a in attachments_of(reply))
    return Quote(author or "someone", text, kinds, by_bot=by_bot)


def addressed_to_bot(message: Message) -> bool:
    """True when `message` @mentions the bot (text or caption), names it after a command
    (`/name@bot`: a skill's slash command in a group), or replies to its message."""
    bot = message.get_bot()
    reply = replied_to(message)  # in a topic the bot opened, not every message is a reply
    if reply is not None and reply.from_user is not None and reply.from_user.id == bot.id:
        return True
    handle = f"@{bot.username}".lower()
    kinds: list[str | None] = [
        MessageEntity.MENTION,
        MessageEntity.TEXT_MENTION,
        MessageEntity.BOT_COMMAND,
    ]
    found = {**message.parse_entities(kinds), **message.parse_caption_entities(kinds)}
    for entity, text in found.items():
        if entity.type == MessageEntity.MENTION and text.lower() == handle:
            return True
        if entity.type == MessageEntity.BOT_COMMAND and text.lower().endswith(handle):
            return True
        if entity.user is not None and entity.user.id == bot.id:
            return True
    return False


class _Addressed(filters.MessageFilter):
    __slots__ = ()

    def filter(self, message: Message) -> bool:
        return addressed_to_bot(message)


ADDRESSED = _Addressed(name="ADDRESSED")  # a PTB filter: mentions the bot or replies to it


class Listening(filters.MessageFilter):
    """A PTB filter: the message's chat asked for every message (/settings reply mode all)."""

    def __init__(self, listens: Callable[[str], bool]) -> None:
        super().__init__(name="LISTENING")
        self._listens = listens

    def filter(self, message: Message) -> bool:
        return self._listens(key_of(message))


def parse_update(raw: object, bot: Bot) -> Update | None:
    """One update as PTB reads it; None (logged by id and reason, never its text) when PTB
    cannot read it, so that one odd update is passed over instead of wedging the rest."""
    try:
        return Update.de_json(raw, bot)  # type: ignore[arg-type]
    except Exception as exc:
        uid, fields = None, type(raw).__name__
        if isinstance(raw, dict):
            uid, fields = raw.get("update_id"), ", ".join(sorted(map(str, raw)))
        log.error(
            "Telegram update %s could not be read (%s; its fields: %s); skipped",
            uid,
            unreadable(exc),
            fields,
        )
        return None


def unreadable(exc: Exception) -> str:
    """Why parsing failed, without the data: the messages of these errors name keys and types,
    while others (a ValueError, say) may quote the value, which can be a user's text."""
    if isinstance(exc, KeyError | TypeError | AttributeError):
        return f"{type(exc).__name__}: {exc}"
    return type(exc).__name__
