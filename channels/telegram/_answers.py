"""The engine's answers in Telegram: a rich message where the answer has structure, HTML
otherwise, kept up to date part by part (``_shown.ShownMessages`` works on :class:`Answers`).

Which answers go rich and how Markdown becomes blocks is ``_rich``. python-telegram-bot 22.8
speaks Bot API 10.0, so sendRichMessage (10.1, with 10.2's ``blocks``) goes through its raw
call, ``Bot.do_api_request``, and the rich edit through ``edit_message_text`` with 10.1's
``rich_message`` in its ``api_kwargs``: both keep PTB's request path (the rate limiter, the
aiohttp transport, the errors it raises).

A rich part Telegram refuses (400: a chat or a client that takes none, a block it does not
know) goes once as its HTML twin, which fits one message: the answer is never lost, and it
is never sent twice, because only a refusal (Telegram answered, nothing was made) falls back;
a request that may have been delivered raises as any send does. A Bot API server without the
method (404, which PTB's raw call raises as ``EndPointNotFound``) is not asked again: answers
go as HTML.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, cast

from telegram import Message
from telegram.error import BadRequest, EndPointNotFound

from channels._shown import ShownMessages
from channels.telegram._outbox import Outbox, Part, reply_parameters
from channels.telegram._rich import rich_parts
from channels.telegram._topics import place
from engine import Untrusted

log = logging.getLogger("channels.telegram")


class Answers:
    """Sends and edits of answers for one bot; `shown` is what the channel's send/edit use."""

    def __init__(self, outbox: Outbox, remember: int) -> None:
        self._outbox = outbox
        self.supported = True  # False once the Bot API said it has no sendRichMessage
        self.shown = ShownMessages[Part](self, remember)

    def render(
        self, text: str, formatted: bool, *, untrusted: Untrusted | None = None
    ) -> list[Part]:
        """Rich parts where the answer has structure; an answer after untrusted content goes
        as HTML (its links to hosts nobody in the chat named as code, no previews)."""
        if untrusted is None and formatted and self.supported and (parts := rich_parts(text)):
            return [Part(p.html, True, p.blocks) for p in parts]
        return self._outbox.render(text, formatted, untrusted=untrusted)

    async def send_part(
        self, chat_id: str, part: Part, reply_to: str | None, *, once: str | None = None
    ) -> str:
        if part.rich is not None and self.supported:
            chat, topic = place(chat_id)
            params = {"chat_id": chat, "message_thread_id": topic, "rich_message": _rich(part)}
            if (reply := reply_parameters(reply_to)) is not None:
                params["reply_parameters"] = reply.to_dict()
            params = {k: v for k, v in params.items() if v is not None}
            bot = self._outbox.bot
            sent = await self._rich_call(
                chat_id,
                lambda: bot.do_api_request("sendRichMessage", params, return_type=Message),
            )
            if isinstance(sent, Message):
                return str(sent.message_id)
        return await self._outbox.send_part(chat_id, _html(part), reply_to, once=once)

    async def edit_part(self, chat_id: str, message_id: str, part: Part) -> None:
        if part.rich is not None and self.supported:
            chat, rich = place(chat_id)[0], {"rich_message": _rich(part)}
            # PTB's own method (do_api_request warns for a method PTB has), its api_kwargs
            # carrying 10.1's rich_message; the text it asks for is left out (PTB drops None).
            edit = functools.partial(
                self._outbox.bot.edit_message_text, cast(str, None), chat, int(message_id)
            )
            if await self._rich_call(chat_id, lambda: edit(api_kwargs=rich)) is not None:
                return
        await self._outbox.edit_part(chat_id, message_id, _html(part))

    async def delete_part(self, chat_id: str, message_id: str) -> None:
        await self._outbox.delete_part(chat_id, message_id)

    async def _rich_call(self, chat_id: str, request: Callable[[], Awaitable[Any]]) -> Any:
        """`request`, patiently; None when Telegram refused it (then the HTML twin goes)."""
        try:
            return await self._outbox.patiently(request)
        except EndPointNotFound:
            log.info("Telegram: this Bot API server has no rich messages; answers go as HTML")
            self.supported = False
        except BadRequest as exc:
            if "not modified" in exc.message.lower():
                return True
            log.warning("Telegram refused a rich message in %s (%s); sent as HTML", chat_id, exc)
        return None


def _rich(part: Part) -> dict[str, Any]:
    return {"blocks": json.loads(part.rich or "[]")}


def _html(part: Part) -> Part:
    return Part(part.text, part.html, quiet=part.quiet)
