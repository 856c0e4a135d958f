"""Telegram updates as the engine sees them: matching (pure) and the per-chat processing order."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

from telegram import Message, MessageEntity, Update
from telegram.constants import ChatType
from telegram.ext import BaseUpdateProcessor, filters

from channels._base import InboundMessage


def inbound_message(message: Message | None) -> InboundMessage | None:
    """The engine's view of a Telegram message (None for messages without a sender)."""
    if message is None or message.from_user is None:
        return None
    user = message.from_user
    reply = message.reply_to_message
    return InboundMessage(
        channel="telegram",
        chat_id=str(message.chat_id),
        user_id=str(user.id),
        user_name=user.full_name or user.username or str(user.id),
        text=message.text or message.caption or "",
        message_id=str(message.message_id),
        is_private=message.chat.type == ChatType.PRIVATE,
        mentioned=addressed_to_bot(message),
        reply_to=str(reply.message_id) if reply is not None else None,
    )


def addressed_to_bot(message: Message) -> bool:
    """True when `message` @mentions the bot (text or caption) or replies to its message."""
    bot = message.get_bot()
    reply = message.reply_to_message
    if reply is not None and reply.from_user is not None and reply.from_user.id == bot.id:
        return True
    handle = f"@{bot.username}".lower()
    kinds = [MessageEntity.MENTION, MessageEntity.TEXT_MENTION]
    found = {**message.parse_entities(kinds), **message.parse_caption_entities(kinds)}
    for entity, text in found.items():
        if entity.type == MessageEntity.MENTION and text.lower() == handle:
            return True
        if entity.user is not None and entity.user.id == bot.id:
            return True
    return False


class _Addressed(filters.MessageFilter):
    __slots__ = ()

    def filter(self, message: Message) -> bool:
        return addressed_to_bot(message)


ADDRESSED = _Addressed(name="ADDRESSED")  # a PTB filter: mentions the bot or replies to it


class ChatOrder(BaseUpdateProcessor):
    """Updates run concurrently, except that those of one chat run one after another in the
    order they arrived (PTB starts them in order; asyncio locks are FIFO)."""

    __slots__ = ("_locks",)

    def __init__(self, max_concurrent_updates: int) -> None:
        super().__init__(max_concurrent_updates)
        self._locks: dict[int, tuple[asyncio.Lock, int]] = {}  # chat → (lock, updates using it)

    async def do_process_update(self, update: object, coroutine: Awaitable[Any]) -> None:
        chat = update.effective_chat if isinstance(update, Update) else None
        if chat is None:
            await coroutine
            return
        lock, users = self._locks.get(chat.id) or (asyncio.Lock(), 0)
        self._locks[chat.id] = (lock, users + 1)
        try:
            async with lock:
                await coroutine
        finally:
            lock, users = self._locks[chat.id]
            if users == 1:
                del self._locks[chat.id]
            else:
                self._locks[chat.id] = (lock, users - 1)

    async def initialize(self) -> None:
        pass

    async def shutdown(self) -> None:
        pass
