"""Telegram updates as the engine sees them: matching (pure), and long polling that confirms a
batch to Telegram only once every update in it has been handled."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta

from telegram import Bot, Message, MessageEntity, Update
from telegram.constants import ChatType
from telegram.error import InvalidToken, RetryAfter, TelegramError
from telegram.ext import filters

from engine._channel import InboundMessage

log = logging.getLogger("channels.telegram")

ALLOWED_UPDATES = (Update.MESSAGE, Update.CALLBACK_QUERY)
_RETRY_MAX_S = 30.0  # longest pause between polls while the Bot API is unreachable
_FINISH_S = 10.0  # on stop: how long a batch in progress may take to finish, and to confirm it


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


class Poller:
    """getUpdates in a loop, handing each update to `handle` (the Application's
    ``process_update``). A batch runs chat by chat: chats concurrently, each chat's updates one
    after another in the order they arrived. The next request, whose offset confirms the batch to
    Telegram, goes out only once every update of the batch has been handled, so a crash never
    loses a confirmed update (the engine's inbox answers a redelivered message once). An update
    that fails is logged and passed over: a poison update cannot wedge the bot."""

    def __init__(
        self,
        bot: Bot,
        handle: Callable[[Update], Awaitable[None]],
        *,
        timeout_s: float,
        retry_initial_s: float,
    ) -> None:
        self._bot = bot
        self._handle = handle
        self._timeout_s = timeout_s
        self._retry_initial_s = retry_initial_s
        self._offset: int | None = None  # the first update not handled yet
        self._confirmed: int | None = None  # the offset of the last getUpdates that succeeded

    async def run(self) -> None:
        """Polls until cancelled. A batch in progress then finishes (bounded), and Telegram is
        told which updates were handled."""
        try:
            await self._poll()
        finally:
            if self._offset != self._confirmed:
                await self._confirm()

    async def _poll(self) -> None:
        delay = self._retry_initial_s
        while True:
            try:
                updates = await self._fetch(self._timeout_s)
            except InvalidToken:  # revoked while running
                log.error("Telegram rejected the bot token; polling stops")
                return
            except RetryAfter as exc:
                wait = _seconds(exc.retry_after)
                log.warning("Telegram asked to wait %gs before polling again", wait)
                await asyncio.sleep(wait)
                continue
            except TelegramError as exc:
                log.warning("Telegram Bot API unreachable, polling again in %gs (%s)", delay, exc)
            except Exception:  # e.g. an update PTB cannot parse
                log.exception("could not read Telegram's updates, retrying in %gs", delay)
            else:
                delay = self._retry_initial_s
                if updates:
                    await _finish_when_cancelled(self._run_batch(updates))
                continue
            await asyncio.sleep(delay)
            delay = min(delay * 2, _RETRY_MAX_S)

    async def _fetch(self, timeout_s: float) -> tuple[Update, ...]:
        offset = self._offset
        updates = await self._bot.get_updates(
            offset=offset, timeout=timeout_s, allowed_updates=ALLOWED_UPDATES
        )
        self._confirmed = offset
        return updates

    async def _run_batch(self, updates: Sequence[Update]) -> None:
        chats: dict[tuple[str, int], list[Update]] = {}
        for update in updates:
            chat = update.effective_chat
            key = ("chat", chat.id) if chat is not None else ("update", update.update_id)
            chats.setdefault(key, []).append(update)
        await asyncio.gather(*(self._in_order(chat) for chat in chats.values()))
        self._offset = updates[-1].update_id + 1

    async def _in_order(self, updates: list[Update]) -> None:
        for update in updates:
            try:
                await self._handle(update)  # handler errors go to PTB's error handler
            except Exception:
                log.exception("Telegram update %s failed", update.update_id)

    async def _confirm(self) -> None:
        try:
            await asyncio.wait_for(self._fetch(0), _FINISH_S)
        except (TelegramError, TimeoutError) as exc:
            log.warning("could not confirm the handled updates, they will come again: %s", exc)


async def _finish_when_cancelled(work: Awaitable[None]) -> None:
    """Await `work`; when cancelled meanwhile, give it _FINISH_S more, then cancel it."""
    task = asyncio.ensure_future(work)
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        log.info("Telegram: stopping once the updates being handled are done")
        if not (await asyncio.wait({task}, timeout=_FINISH_S))[0]:
            log.warning("stopped with Telegram updates still being handled; they come again")
            task.cancel()
            await asyncio.wait({task})
        raise


def _seconds(period: int | timedelta) -> float:
    return period.total_seconds() if isinstance(period, timedelta) else float(period)
