"""Questions a tool puts to the user whose call it is (an MCP server's elicitation), answered
while the call waits.

A question of one yes/no or one-of-a-list field (or none: a plain "go on?") gets the platform's
native buttons, in private (the question is that user's alone), like the other button menus:
each press comes back as an :class:`Action` ("q:<id>:<n>") whose presser must be the asker. A
longer form (or any, where buttons cannot be shown) is shown in the chat as a short form the
user answers by replying, one "field: value" line each; that reply is taken before the chat's
queue (the turn that asked is still running there), by the asker alone. No answer in time,
"cancel", or the decline button: declined. Nothing here is stored: a question lives as long as
the call that asked it.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engine._channel import Action, Button, Channel, InboundMessage, Reply
from engine.chat._confirmations._form import Form
from engine.i18n import translator
from engine.loop import ConversationKey

log = logging.getLogger(__name__)

Language = Callable[[ConversationKey, str], str]


@dataclass(slots=True)
class _Open:
    key: ConversationKey
    user_id: str
    form: Form
    language: str
    answer: asyncio.Future[dict[str, Any] | None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class Questions:
    """The questions waiting for an answer, by id."""

    def __init__(self, channels: Mapping[str, Channel], language: Language) -> None:
        self.channels = channels
        self.language = language  # the user's language in that chat, read per question
        self._open: dict[str, _Open] = {}

    async def ask(
        self,
        key: ConversationKey,
        user_id: str,
        message: str,
        schema: dict[str, Any],
        *,
        timeout_s: float,
    ) -> dict[str, Any] | None:
        """The user's answer (the form's fields, typed), or None: declined, or no answer in
        `timeout_s`. Raises ValueError for a schema no form can take."""
        form = Form.of(schema)
        channel = self.channels.get(key.channel)
        if channel is None:
            return None
        qid = secrets.token_hex(4)
        lang = self.language(key, user_id)
        asked = _Open(key, user_id, form, lang)
        self._open[qid] = asked
        try:
            await self._show(channel, qid, asked, message)
            async with asyncio.timeout(timeout_s):
                return await asked.answer
        except TimeoutError:
            log.info("a question to %s in %s had no answer in time: declined", user_id, key)
            return None
        finally:
            self._open.pop(qid, None)

    async def _show(self, channel: Channel, qid: str, asked: _Open, message: str) -> None:
        _ = translator(asked.language).gettext
        choices = asked.form.choices(asked.language)
        if choices is not None and channel.capabilities.buttons:
            buttons = [Button(label, f"q:{qid}:{n}") for n, (label, _v) in enumerate(choices)]
            buttons.append(Button(_("Decline"), f"q:{qid}:x"))
            try:
                if await channel.send_private(asked.user_id, Reply(message, tuple(buttons))):
                    return
            except Exception as exc:  # no private chat with the bot yet: the form in the chat
                log.info("could not ask %s in private (%s): asking in the chat", asked.user_id, exc)
        lines = asked.form.describe(asked.language)
        how = _("Reply with one line per field, as “field: value”, or “cancel” to decline:")
        await channel.send(asked.key.chat_id, f"{message}\n\n{how}\n{lines}", formatted=False)

    async def act(self, action: Action) -> Reply | None:
        """A press on a question's button; None when the action is not one of ours."""
        if not action.action.startswith("q:"):
            return None
        _ = translator(action.language).gettext
        qid, _sep, choice = action.action.removeprefix("q:").partition(":")
        asked = self._open.get(qid)
        if asked is None or asked.answer.done():
            return Reply(_("This question is closed."))
        if asked.user_id != action.user_id or asked.key.channel != action.channel:
            return Reply(_("Only the person who was asked can answer this."))
        choices = asked.form.choices(asked.language) or []
        if choice == "x" or not choice.isdigit() or int(choice) >= len(choices):
            asked.answer.set_result(None)
            return Reply(_("Declined."))
        label, value = choices[int(choice)]
        asked.answer.set_result(value)
        return Reply(_("Answered: {answer}").format(answer=label))

    async def reply(self, msg: InboundMessage) -> bool:
        """Take `msg` as the answer to a short form its sender was asked in its chat; False
        when it is not one (the message goes on to the chat as usual)."""
        key = ConversationKey(msg.channel, msg.chat_id)
        asked = next(
            (q for q in self._open.values() if q.key == key and q.user_id == msg.user_id), None
        )
        if asked is None or asked.answer.done():
            return False
        _ = translator(asked.language).gettext
        if msg.text.strip().lower() in ("cancel", "/cancel", _("cancel")):
            asked.answer.set_result(None)
            return True
        try:
            asked.answer.set_result(asked.form.read(msg.text, asked.language))
        except ValueError as exc:
            channel = self.channels.get(msg.channel)
            if channel is not None:
                said = _("That did not fit the form: {reason}. Try again, or reply “cancel”.")
                await channel.send(msg.chat_id, said.format(reason=exc), formatted=False)
        return True
