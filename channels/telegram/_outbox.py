# Left whole: one idea, Telegram's rules for what the bot sends and edits (length, HTML, retries).
"""What the bot shows in Telegram: sends and edits, with Telegram's rules applied.

Markdown goes out as HTML, cut into 4096-character parts after formatting; when Telegram cannot
parse the entities the same part goes again as plain text. Which messages show which part, and
editing only what changed, is ``_shown.ShownMessages``, over ``_answers`` (rich messages) and the
parts this module sends.
A confirmation prompt is one message: text, or a document (the complete action) whose caption
is the text, with the buttons on it. A file goes as a photo when Telegram can show it as one,
Ogg/Opus audio as a voice note, else as a document. While the Bot API is unreachable a request
is retried with backoff, but only when it surely was not delivered.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from telegram import Bot, InlineKeyboardMarkup, InputFile, LinkPreviewOptions, ReplyParameters
from telegram.constants import ChatAction, ParseMode
from telegram.error import BadRequest, NetworkError, TelegramError

from channels._links import unfetchable
from channels._prompt import ATTACHMENT_NAME, PromptMessage
from channels._shown import ShownMessages
from channels.telegram._format import (
    CAPTION_LIMIT,
    TELEGRAM_LIMIT,
    html_to_plain,
    plain_parts,
    render,
    render_untrusted,
)
from channels.telegram._http import not_sent
from channels.telegram._topics import place
from engine import Backoff, MessageRef, OutgoingFile, Untrusted
from engine.metrics import api_retry

log = logging.getLogger("channels.telegram")
_T = TypeVar("_T")

_PATIENCE_S = 120.0  # how long a request keeps retrying before its error reaches the caller
_REMEMBERED = 1024  # messages whose shown text is kept, to skip unchanged edits
_NO_BUTTONS = InlineKeyboardMarkup([])
_NO_PREVIEW = LinkPreviewOptions(is_disabled=True)
_PHOTO_TYPES = frozenset({"image/jpeg", "image/png", "image/webp"})
_VOICE_TYPE = "audio/ogg"  # Opus in Ogg: played as a voice note
THOUGHTS_CHARS = 3500  # of a thinking view: with its markup, within one message's 4096
_PHOTO_MAX = 10 * 1024 * 1024  # sendPhoto's limit; larger pictures go as documents


@dataclass(frozen=True, slots=True)
class Part:
    """One message's worth of text: Telegram HTML, or plain text; with `rich`, the same content
    as rich message blocks (JSON), sent in its place where Telegram takes them (``_answers``);
    `quiet`: no link preview (an answer written after untrusted content: the preview request
    would leave unasked)."""

    text: str
    html: bool
    rich: str | None = None
    quiet: bool = False


class Outbox:
    """Sends and edits for one bot. Requests wait until :meth:`open` (the bot is connected)."""

    def __init__(self, bot: Bot, retry_initial_s: float = 1.0) -> None:
        self.bot = bot
        self.retry_initial_s = retry_initial_s
        self._open = asyncio.Event()
        self.shown = ShownMessages[Part](self, _REMEMBERED)  # texts; answers: ``_answers``
        # Prompts that are documents (their text is a caption), latest last: closed by editing
        # the caption, never with editMessageText, which Telegram refuses on them.
        self._documents: OrderedDict[MessageRef, None] = OrderedDict()

    def open(self) -> None:
        self._open.set()

    def close(self) -> None:
        self._open.clear()

    async def wait_open(self) -> None:
        await self._open.wait()

    async def send_file(self, chat_id: str, file: OutgoingFile, reply_to: str | None) -> str:
        """One file: with sendPhoto when it is a picture Telegram shows as a photo, sendVoice
        for Ogg/Opus audio (a spoken answer), else (or when Telegram refuses it as a photo, e.g.
        for its dimensions) with sendDocument."""
        upload = InputFile(file.data, filename=file.name)
        if file.mime_type == _VOICE_TYPE:
            chat, topic = place(chat_id)
            sent = await self._patiently(
                lambda: self.bot.send_voice(
                    chat, upload, reply_parameters=_reply(reply_to), message_thread_id=topic
                )
            )
            return str(sent.message_id)

        async def call(as_photo: bool) -> Any:
            send = self.bot.send_photo if as_photo else self.bot.send_document
            chat, topic = place(chat_id)
            return await send(
                chat, upload, reply_parameters=_reply(reply_to), message_thread_id=topic
            )

        as_photo = file.mime_type in _PHOTO_TYPES and len(file.data) <= _PHOTO_MAX
        try:
            sent = await self._patiently(lambda: call(as_photo))
        except BadRequest as exc:
            if not as_photo:
                raise
            log.info("Telegram refused %s as a photo (%s); sending it as a file", file.name, exc)
            sent = await self._patiently(lambda: call(False))
        return str(sent.message_id)

    async def send_prompt(
        self,
        chat_id: str,
        prompt: PromptMessage,
        *,
        reply_to: str | None,
        markup: InlineKeyboardMarkup,
    ) -> MessageRef:
        """One message with the buttons: `prompt.text`, or a document with it as caption."""
        if prompt.attachment is None:
            message_id = await self.send_part(chat_id, Part(prompt.text, True), reply_to, markup)
            return MessageRef(chat_id, message_id)
        document = InputFile(prompt.attachment, filename=ATTACHMENT_NAME)
        chat, topic = place(chat_id)

        async def call(caption: str, mode: str | None) -> Any:
            return await self.bot.send_document(
                chat,
                document,
                message_thread_id=topic,
                caption=caption,
                parse_mode=mode,
                reply_parameters=_reply(reply_to),
                reply_markup=markup,
            )

        sent = await self._patiently(lambda: _html_or_plain(call, prompt.text, True))
        ref = MessageRef(chat_id, str(sent.message_id))
        self._remember_document(ref)
        return ref

    async def send_thoughts(self, chat_id: str, thoughts: str, reply_to: str | None) -> MessageRef:
        """The model's reasoning as an expandable block quotation (cut to fit one message)."""
        body = html.escape(thoughts[:THOUGHTS_CHARS])
        quoted = Part(f"<blockquote expandable>💭 {body}</blockquote>", True)
        return MessageRef(chat_id, await self.send_part(chat_id, quoted, reply_to))

    async def send_menu(
        self, chat_id: str, text: str, reply_to: str | None, markup: InlineKeyboardMarkup
    ) -> MessageRef:
        """A command's reply: its parts in order, the buttons under the last one."""
        parts = self.render(text, True)
        message_id = ""
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            message_id = await self.send_part(
                chat_id, part, reply_to if i == 0 else None, markup if last else None
            )
        return MessageRef(chat_id, message_id)

    async def edit_menu(
        self, chat_id: str, message_id: str, text: str, markup: InlineKeyboardMarkup
    ) -> None:
        """Replace a command reply's text and buttons (a menu is short: one part). The press
        was handled whatever happens here: an edit Telegram refuses (the message deleted, or
        too old to edit) is one log line, not a traceback."""
        try:
            await self._edit(chat_id, message_id, self.render(text, True)[0], markup)
        except TelegramError as exc:
            log.warning("telegram: the menu in chat %s was not updated: %s", chat_id, exc)

    async def close_buttons(self, ref: MessageRef, text: str) -> None:
        """Replace the text (or a document's caption) of a prompt and remove its buttons.

        A prompt this process sent as a document has its caption edited at once. One sent before
        a restart is not known to be one: Telegram's refusal of the text edit ("there is no text
        in the message to edit") says so, once, and the caption is edited instead."""
        if ref in self._documents:
            await self._close_caption(ref, text)
            return
        first, *rest = self.render(text, True)
        try:
            await self._edit(ref.chat_id, ref.message_id, first, _NO_BUTTONS)
        except BadRequest as exc:
            if "no text in the message" not in exc.message.lower():
                raise
            self._remember_document(ref)
            await self._close_caption(ref, text)
            return
        for part in rest:
            await self.send_part(ref.chat_id, part, None)

    async def _close_caption(self, ref: MessageRef, text: str) -> None:
        caption = self.render(text, True, CAPTION_LIMIT)[0]  # a status line: the file stays
        await self._edit(ref.chat_id, ref.message_id, caption, _NO_BUTTONS, caption=True)

    def _remember_document(self, ref: MessageRef) -> None:
        """Remember that the prompt at `ref` is a document (the newest _REMEMBERED of them)."""
        self._documents[ref] = None
        self._documents.move_to_end(ref)
        while len(self._documents) > _REMEMBERED:
            self._documents.popitem(last=False)

    async def typing(self, chat_id: str) -> None:
        if not self._open.is_set():
            return  # no point queueing an indicator
        try:
            chat, topic = place(chat_id)
            await self.bot.send_chat_action(chat, ChatAction.TYPING, message_thread_id=topic)
        except TelegramError as exc:
            log.debug("typing indicator failed: %s", exc)

    # -- the Surface that ShownMessages works on (for answers through ``_answers.Answers``) ---

    def render(
        self,
        text: str,
        formatted: bool,
        limit: int | None = None,
        *,
        untrusted: Untrusted | None = None,
    ) -> list[Part]:
        most = TELEGRAM_LIMIT if limit is None else limit
        quiet = untrusted is not None  # after untrusted content: never previewed
        if untrusted is not None and (formatted or unfetchable(text, untrusted)):  # URLs: code
            html = render_untrusted(text, formatted, untrusted, most)
            return [Part(p, True, quiet=quiet) for p in html] or [Part("…", False, quiet=quiet)]
        parts = render(text, most) if formatted else plain_parts(text, most)  # never empty:
        return [Part(p, formatted, quiet=quiet) for p in parts] or [Part("…", False, quiet=quiet)]

    async def send_part(
        self,
        chat_id: str,
        part: Part,
        reply_to: str | None,
        markup: InlineKeyboardMarkup | None = None,
        *,
        once: str | None = None,  # Telegram has no idempotency key: the send window stays
    ) -> str:
        chat, topic = place(chat_id)

        async def call(body: str, mode: str | None) -> Any:
            return await self.bot.send_message(
                chat,
                body,
                message_thread_id=topic,
                parse_mode=mode,
                reply_parameters=_reply(reply_to),
                reply_markup=markup,
                link_preview_options=_NO_PREVIEW if part.quiet else None,
            )

        sent = await self._patiently(lambda: _html_or_plain(call, part.text, part.html))
        return str(sent.message_id)

    async def edit_part(self, chat_id: str, message_id: str, part: Part) -> None:
        await self._edit(chat_id, message_id, part)

    async def delete_part(self, chat_id: str, message_id: str) -> None:
        with contextlib.suppress(TelegramError):  # already gone, or too old: it stays
            await self.bot.delete_message(place(chat_id)[0], int(message_id))

    # -- requests ------------------------------------------------------------------------------

    async def _edit(
        self,
        chat_id: str,
        message_id: str,
        part: Part,
        markup: InlineKeyboardMarkup | None = None,
        *,
        caption: bool = False,
    ) -> None:
        """Edit one message's text (or caption); Telegram's "not modified" is success."""

        chat, mid = place(chat_id)[0], int(message_id)  # a message id is the chat's, topic or not

        async def call(body: str, mode: str | None) -> Any:
            if caption:
                return await self.bot.edit_message_caption(
                    chat, mid, caption=body, parse_mode=mode, reply_markup=markup
                )
            return await self.bot.edit_message_text(
                body,
                chat,
                mid,
                parse_mode=mode,
                reply_markup=markup,
                link_preview_options=_NO_PREVIEW if part.quiet else None,
            )

        try:
            await self._patiently(lambda: _html_or_plain(call, part.text, part.html))
        except BadRequest as exc:
            if "not modified" not in exc.message.lower():
                raise

    async def patiently(self, request: Callable[[], Awaitable[_T]]) -> _T:
        """:meth:`_patiently`, for raw requests made elsewhere (``_answers``, ``_private``)."""
        return await self._patiently(request)

    async def _patiently(self, request: Callable[[], Awaitable[_T]]) -> _T:
        """`request` once open, retried with backoff (for a bounded time) while the Bot API is
        unreachable. A request that may have been delivered is not repeated."""
        if not self._open.is_set():
            await self._open.wait()
        backoff = Backoff(self.retry_initial_s)
        while True:
            try:
                result = await request()
            except NetworkError as exc:
                if not not_sent(exc) or backoff.waited_s >= _PATIENCE_S:
                    raise
                log.warning(
                    "Telegram Bot API unreachable, retrying in %gs (%s)", backoff.upcoming_s, exc
                )
                api_retry("telegram")
                await backoff.sleep()
                continue
            if backoff.waited_s:
                log.info("Telegram Bot API reachable again")
            return result


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


def reply_parameters(reply_to: str | None) -> ReplyParameters | None:
    """A reply to message `reply_to` that is still sent when that message is gone."""
    return _reply(reply_to)


def _reply(reply_to: str | None) -> ReplyParameters | None:
    if not reply_to:
        return None
    return ReplyParameters(int(reply_to), allow_sending_without_reply=True)
