"""What the bot shows in Telegram: sends and edits, with Telegram's rules applied.

Markdown goes out as HTML, cut into 4096-character parts after formatting; when Telegram cannot
parse the entities the same part goes again as plain text. An edit only sends the parts whose
text changed ("message is not modified" counts as success); a text that outgrows its message
continues in follow-up messages that later edits keep up to date. While the Bot API is
unreachable a request is retried with backoff, but only when it surely was not delivered.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from telegram import Bot, InlineKeyboardMarkup, Message, ReplyParameters
from telegram.constants import ChatAction, ParseMode
from telegram.error import BadRequest, NetworkError, TelegramError

from channels._telegram_format import html_to_plain, plain_parts, render
from channels._telegram_http import not_sent
from engine._channel import MessageRef

log = logging.getLogger("channels.telegram")
_T = TypeVar("_T")

_RETRY_MAX_S = 30.0  # longest pause between attempts while the Bot API is unreachable
_PATIENCE_S = 120.0  # how long a request keeps retrying before its error reaches the caller
_REMEMBERED = 1024  # messages whose shown text is kept, to skip unchanged edits
_NO_BUTTONS = InlineKeyboardMarkup([])


class Outbox:
    """Sends and edits for one bot. Requests wait until :meth:`open` (the bot is connected)."""

    def __init__(self, bot: Bot, retry_initial_s: float = 1.0) -> None:
        self.bot = bot
        self.retry_initial_s = retry_initial_s
        self._open = asyncio.Event()
        self._refused: str | None = None
        self._shown: OrderedDict[tuple[str, str], list[_Shown]] = OrderedDict()

    def open(self) -> None:
        self._open.set()

    def refuse(self, reason: str) -> None:
        """Nothing can be sent (e.g. the token was rejected): waiting requests fail."""
        self._refused = reason
        self._open.set()

    def close(self) -> None:
        self._open.clear()

    async def send(
        self,
        chat_id: str,
        text: str,
        *,
        reply_to: str | None = None,
        formatted: bool = True,
        markup: InlineKeyboardMarkup | None = None,
    ) -> MessageRef:
        """Send every part in order (reply on the first, buttons on the last); returns the
        last part's reference."""
        parts = _parts(text, formatted)
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            sent = await self._send_part(
                chat_id,
                part,
                html=formatted,
                reply_to=reply_to if i == 0 else None,
                markup=markup if last else None,
            )
        self._remember((chat_id, str(sent.message_id)), [_Shown(sent.message_id, parts[-1])])
        return MessageRef(chat_id, str(sent.message_id))

    async def edit(self, ref: MessageRef, text: str, *, formatted: bool = True) -> None:
        parts = _parts(text, formatted)
        key = (ref.chat_id, ref.message_id)
        shown = self._shown.pop(key, None) or [_Shown(int(ref.message_id), "")]
        try:
            for i, part in enumerate(parts):
                if i == len(shown):
                    sent = await self._send_part(ref.chat_id, part, html=formatted)
                    shown.append(_Shown(sent.message_id, part))
                elif shown[i].text != part:
                    await self._edit_part(ref.chat_id, shown[i].message_id, part, html=formatted)
                    shown[i].text = part
            while len(shown) > len(parts):  # the text got shorter: drop stale follow-ups
                with contextlib.suppress(TelegramError):
                    await self.bot.delete_message(_chat(ref.chat_id), shown[-1].message_id)
                shown.pop()
        finally:
            self._remember(key, shown)

    async def close_buttons(self, ref: MessageRef, text: str) -> None:
        """Replace the text of a message with buttons and remove the buttons."""
        first, *rest = _parts(text, True)
        await self._edit_part(
            ref.chat_id, int(ref.message_id), first, html=True, markup=_NO_BUTTONS
        )
        for part in rest:
            await self._send_part(ref.chat_id, part, html=True)

    async def typing(self, chat_id: str) -> None:
        if not self._open.is_set() or self._refused:
            return  # no point queueing an indicator
        try:
            await self.bot.send_chat_action(_chat(chat_id), ChatAction.TYPING)
        except TelegramError as exc:
            log.debug("typing indicator failed: %s", exc)

    async def _send_part(
        self,
        chat_id: str,
        text: str,
        *,
        html: bool,
        reply_to: str | None = None,
        markup: InlineKeyboardMarkup | None = None,
    ) -> Message:
        reply = (
            ReplyParameters(int(reply_to), allow_sending_without_reply=True) if reply_to else None
        )

        async def call(body: str, mode: str | None) -> Message:
            return await self.bot.send_message(
                _chat(chat_id), body, parse_mode=mode, reply_parameters=reply, reply_markup=markup
            )

        return await self._patiently(lambda: _html_or_plain(call, text, html))

    async def _edit_part(
        self,
        chat_id: str,
        message_id: int,
        text: str,
        *,
        html: bool,
        markup: InlineKeyboardMarkup | None = None,
    ) -> bool:
        """Edit one message; False when Telegram says nothing changed (which is fine)."""

        async def call(body: str, mode: str | None) -> Any:
            return await self.bot.edit_message_text(
                body, _chat(chat_id), message_id, parse_mode=mode, reply_markup=markup
            )

        try:
            await self._patiently(lambda: _html_or_plain(call, text, html))
        except BadRequest as exc:
            if "not modified" in exc.message.lower():
                return False
            raise
        return True

    async def _patiently(self, request: Callable[[], Awaitable[_T]]) -> _T:
        """`request` once open, retried with backoff (for a bounded time) while the Bot API is
        unreachable. A request that may have been delivered is not repeated."""
        if not self._open.is_set():
            await self._open.wait()
        if self._refused:
            raise RuntimeError(f"the Telegram channel is off: {self._refused}")
        delay, waited = self.retry_initial_s, 0.0
        while True:
            try:
                result = await request()
            except NetworkError as exc:
                if not not_sent(exc) or waited >= _PATIENCE_S:
                    raise
                log.warning("Telegram Bot API unreachable, retrying in %gs (%s)", delay, exc)
                await asyncio.sleep(delay)
                waited += delay
                delay = min(delay * 2, _RETRY_MAX_S)
                continue
            if waited:
                log.info("Telegram Bot API reachable again")
            return result

    def _remember(self, key: tuple[str, str], shown: list[_Shown]) -> None:
        self._shown[key] = shown
        while len(self._shown) > _REMEMBERED:
            self._shown.popitem(last=False)


class _Shown:
    """A message the bot sent and the text it now shows."""

    __slots__ = ("message_id", "text")

    def __init__(self, message_id: int, text: str) -> None:
        self.message_id, self.text = message_id, text


async def _html_or_plain(
    call: Callable[[str, str | None], Awaitable[Any]], text: str, html: bool
) -> Any:
    """`call` with HTML; when Telegram cannot parse the entities, again with the plain text."""
    if not html:
        return await call(text, None)
    try:
        return await call(text, ParseMode.HTML)
    except BadRequest as exc:
        if "can't parse entities" not in exc.message.lower():
            raise
        log.warning("Telegram rejected the HTML (%s); sending it as plain text", exc.message)
        return await call(html_to_plain(text), None)


def _parts(text: str, formatted: bool) -> list[str]:
    parts = render(text) if formatted else plain_parts(text)
    return parts or ["…"]  # Telegram refuses empty messages


def _chat(chat_id: str) -> int | str:
    return int(chat_id) if chat_id.lstrip("-").isdigit() else chat_id
