"""Private replies in groups: what is meant for one member (a confirmation with its buttons, a
refusal, a limit notice, an error, an answer to /usage, /memory, /settings or /permissions, a
pairing code) shown only to them, in the group, as a Telegram ephemeral message; the answer to
the conversation stays public.

Ephemeral messages came with Bot API 10.2 and took their present form in 10.3: a send method
given ``ephemeral_message_parameters`` (``receiver_user_id``) delivers the message to that user
only, and answers with an ``ephemeral_message_id``; such a message is edited and deleted by
``editEphemeralMessage…`` / ``deleteEphemeralMessage`` with (chat, receiver, id), never by
message id. python-telegram-bot 22.8 speaks Bot API 10.0, so these go through its raw request
(``Bot.do_api_request``), with the same HTML-or-plain fallback as every other send.

Where the chat is private, the owner turned this off (``[telegram] private_replies``), or the
chat or server refuses the ephemeral (400), the message goes to the group as before: nothing is
lost. Telegram does not promise delivery to a member who is offline; a confirmation they never
saw expires as any other, and they can ask again.

How the engine keeps such a message: its :class:`MessageRef` holds the chat as usual and, as
message id, ``e<receiver>:<ephemeral id>`` (:func:`ephemeral_ref`), a text the store keeps as
it keeps any id, so the prompt is closed the right way after a restart too.
"""

from __future__ import annotations

import contextlib
import re
import warnings
from collections import OrderedDict
from typing import Any

from telegram import Bot, InlineKeyboardMarkup, InputFile, Message
from telegram.error import BadRequest, TelegramError
from telegram.warnings import PTBUserWarning

from channels._prompt import ATTACHMENT_NAME, PromptMessage
from channels.telegram._format import CAPTION_LIMIT
from channels.telegram._markup import answer_buttons
from channels.telegram._outbox import Outbox, Part, _html_or_plain
from channels.telegram._topics import place
from engine import ConfirmationPrompt, MessageRef

_REMEMBERED = 1024  # ephemeral prompts remembered as documents
_REF = re.compile(r"^e(?P<user>\d+):(?P<id>\d+)$")
# PTB warns when the raw request names a method it knows: here on purpose, for a parameter it
# does not (ephemeral_message_parameters, Bot API 10.3).
warnings.filterwarnings(
    "ignore", r"Please use 'Bot\.send(Message|Document)'", PTBUserWarning, r"channels\.telegram"
)


def in_group(chat_id: str) -> bool:
    """Telegram's group and supergroup ids are negative; a private chat's is the user's."""
    return str(place(chat_id)[0]).startswith("-")


def ephemeral_ref(chat_id: str, receiver: int | str, ephemeral_id: int) -> MessageRef:
    return MessageRef(chat_id, f"e{receiver}:{ephemeral_id}")


def ephemeral_of(ref: MessageRef) -> tuple[int, int] | None:
    """(receiver, ephemeral id) of a ref made by :func:`ephemeral_ref`; None for a message of
    the chat's own."""
    m = _REF.match(ref.message_id)
    return (int(m["user"]), int(m["id"])) if m else None


def ephemeral_id_of(message: Message) -> int | None:
    """The ``ephemeral_message_id`` of a message PTB parsed (a 10.2 field: in ``api_kwargs``)."""
    found = message.api_kwargs.get("ephemeral_message_id")
    return int(found) if isinstance(found, int) else None


class PrivateReplies:
    """Ephemeral sends and edits for one bot, through `outbox`'s patience and fallbacks."""

    def __init__(self, outbox: Outbox, enabled: bool) -> None:
        """`enabled`: ``[telegram] private_replies`` (restart-only, as the whole section)."""
        self._outbox = outbox
        self._enabled = enabled
        # Ephemeral prompts sent as documents by this process, latest last (edited by caption)
        self._documents: OrderedDict[MessageRef, None] = OrderedDict()

    def wanted(self, chat_id: str) -> bool:
        """Whether what concerns one member of `chat_id` goes to them alone: in a group, with
        private replies on."""
        return self._enabled and in_group(chat_id) and "/guest:" not in chat_id

    @property
    def _bot(self) -> Bot:
        return self._outbox.bot

    async def send(
        self,
        chat_id: str,
        user_id: str,
        text: str,
        *,
        reply_to: str | None = None,
        markup: InlineKeyboardMarkup | None = None,
    ) -> MessageRef | None:
        """`text` (Markdown) to `user_id` only, in the group `chat_id`, the buttons under its
        last part; None when not :meth:`wanted` there or Telegram refused it (then nothing was
        shown: send it publicly)."""
        if not self.wanted(chat_id):
            return None
        parts = self._outbox.render(text, True)
        ref: MessageRef | None = None
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            ref = await self.send_part(
                chat_id, user_id, part, reply_to if i == 0 else None, markup if last else None
            )
            if ref is None:
                return None  # refused: the first part is, or none of them would be
        return ref

    async def send_part(
        self,
        chat_id: str,
        user_id: str,
        part: Part,
        reply_to: str | None,
        markup: InlineKeyboardMarkup | None = None,
    ) -> MessageRef | None:
        async def call(body: str, mode: str | None) -> Any:
            return await self._request(
                "sendMessage", chat_id, user_id, reply_to, markup, body, mode
            )

        return await self._sent(chat_id, user_id, call, part)

    async def send_prompt(
        self, prompt: ConfirmationPrompt, shown: PromptMessage
    ) -> MessageRef | None:
        """A confirmation to its requester alone: `shown`'s text with the buttons, or the
        document with the complete action and the text as its caption. None: see :meth:`send`."""
        if not self.wanted(prompt.chat_id):
            return None
        buttons = answer_buttons(prompt)
        part = Part(shown.text, True)
        if shown.attachment is None:
            return await self.send_part(
                prompt.chat_id, prompt.user_id, part, prompt.reply_to, buttons
            )
        document = InputFile(shown.attachment, filename=ATTACHMENT_NAME)
        return await self.send_document(
            prompt.chat_id, prompt.user_id, document, part, prompt.reply_to, buttons
        )

    async def send_document(
        self,
        chat_id: str,
        user_id: str,
        document: InputFile,
        part: Part,
        reply_to: str | None,
        markup: InlineKeyboardMarkup,
    ) -> MessageRef | None:
        """A prompt whose action is attached: the document with `part` as its caption."""

        async def call(body: str, mode: str | None) -> Any:
            extra = {"document": document, "caption": body}
            return await self._request(
                "sendDocument", chat_id, user_id, reply_to, markup, None, mode, extra
            )

        ref = await self._sent(chat_id, user_id, call, part)
        if ref is not None:
            self._documents[ref] = None
            while len(self._documents) > _REMEMBERED:
                self._documents.popitem(last=False)
        return ref

    async def edit(
        self, ref: MessageRef, text: str, markup: InlineKeyboardMarkup | None = None
    ) -> None:
        """Replace an ephemeral message's text (and buttons; none: removed); a prompt sent as a
        document has its caption replaced (Telegram refuses a text edit on it, which says so)."""
        found = ephemeral_of(ref)
        assert found is not None, ref
        receiver, eid = found
        chat = place(ref.chat_id)[0]
        first = self._outbox.render(text, True)[0]
        where = {"chat_id": chat, "receiver_user_id": receiver, "ephemeral_message_id": eid}
        keyboard = {"reply_markup": markup} if markup is not None else {}
        if ref in self._documents:
            await self._edit_caption(where | keyboard, text)
            return

        async def call(body: str, mode: str | None) -> Any:
            shown = {"text": body} | ({"parse_mode": mode} if mode else {})
            return await self._bot.do_api_request(
                "editEphemeralMessageText", api_kwargs=where | shown | keyboard
            )

        try:
            await self._outbox.patiently(lambda: _html_or_plain(call, first.text, first.html))
        except BadRequest as exc:
            message = exc.message.lower()
            if "not modified" in message:
                return
            if "no text" not in message:
                raise
            await self._edit_caption(where | keyboard, text)  # a prompt sent as a document

    async def _edit_caption(self, where: dict[str, Any], text: str) -> None:
        caption = self._outbox.render(text, True, CAPTION_LIMIT)[0]  # a status line: file stays

        async def call(body: str, mode: str | None) -> Any:
            shown = {"caption": body} | ({"parse_mode": mode} if mode else {})
            return await self._bot.do_api_request(
                "editEphemeralMessageCaption", api_kwargs=where | shown
            )

        await self._outbox.patiently(lambda: _html_or_plain(call, caption.text, caption.html))

    async def delete(self, chat_id: str, receiver: int, ephemeral_id: int) -> None:
        """Delete an ephemeral message (gone already: nothing to do)."""
        where = {"receiver_user_id": receiver, "ephemeral_message_id": ephemeral_id}
        with contextlib.suppress(TelegramError):
            await self._bot.do_api_request(
                "deleteEphemeralMessage", api_kwargs={"chat_id": place(chat_id)[0]} | where
            )

    async def _sent(self, chat_id: str, user_id: str, call: Any, part: Part) -> MessageRef | None:
        try:
            sent = await self._outbox.patiently(lambda: _html_or_plain(call, part.text, part.html))
        except BadRequest:
            return None
        eid = sent.get("ephemeral_message_id") if isinstance(sent, dict) else None
        if not isinstance(eid, int):
            return None  # not kept apart: treat as refused (it is not shown to them alone)
        return ephemeral_ref(chat_id, user_id, eid)

    async def _request(
        self,
        method: str,
        chat_id: str,
        user_id: str,
        reply_to: str | None,
        markup: InlineKeyboardMarkup | None,
        text: str | None,
        mode: str | None,
        extra: dict[str, Any] | None = None,
    ) -> Any:
        chat, topic = place(chat_id)
        kwargs: dict[str, Any] = {
            "chat_id": chat,
            "ephemeral_message_parameters": {"receiver_user_id": int(user_id)},
        }
        optional = {
            "message_thread_id": topic,
            "text": text,
            "parse_mode": mode,
            "reply_markup": markup,
            "reply_parameters": (
                {"message_id": int(reply_to), "allow_sending_without_reply": True}
                if reply_to
                else None
            ),
        }
        kwargs |= {k: v for k, v in optional.items() if v is not None} | (extra or {})
        return await self._bot.do_api_request(method, api_kwargs=kwargs)
