"""relaybot's own words in a chat: a notice, an apology (:func:`apology` when the model failed), a
refusal, what a tool shows the user.

They are not part of the conversation's history, and they are sent only while this instance may
send for its chats: with several instances, one whose lease may have run out sends nothing more
(another may be recovering its chats; engine/work/_cluster.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from engine._channel import Channel, Untrusted
from engine.chat._turns._media_out import send_files
from engine.i18n import N_, translator
from engine.loop import ConversationKey, SendFiles
from tools import File
from tools.errors import (
    ContextOverflow,
    LLMError,
    ModelAuthError,
    ModelRateLimited,
    ModelRefused,
    ModelServerError,
    ModelTimedOut,
    PromptTooLarge,
    StoreUnavailable,
)
from tools.registry import Send

log = logging.getLogger("engine.chat._turns._runner")


def _always() -> bool:
    return True


class Notices:
    def __init__(
        self, channels: Mapping[str, Channel], may_send: Callable[[], bool] = _always
    ) -> None:
        self.channels = channels
        self.may_send = may_send

    async def say(
        self,
        channel_name: str,
        chat_id: str,
        text: str,
        reply_to: str | None,
        *,
        to: str | None = None,
        untrusted: Untrusted | None = None,
    ) -> None:
        """Show relaybot's own text (or a tool's, `untrusted` when it follows untrusted
        content); a failure to send is logged, not raised. With `to` (a user id), it concerns
        that member only: shown to them alone where the channel can
        (:meth:`Channel.send_personal`)."""
        channel = self.channels.get(channel_name)
        if channel is None:
            log.warning("cannot send to %s:%s: channel not running", channel_name, chat_id)
            return
        self.check_lease()
        try:
            if to is None:
                await channel.send(chat_id, text, reply_to=reply_to, untrusted=untrusted)
            else:
                await channel.send_personal(chat_id, to, text, reply_to=reply_to)
        except Exception as exc:
            log.warning("could not send a notice to %s:%s: %s", channel_name, chat_id, exc)

    def check_lease(self) -> None:
        """Raises when this instance must not send anything more for its chats."""
        if not self.may_send():
            raise StoreUnavailable("this instance's lease may have run out: it sends nothing more")

    def sender(
        self, key: ConversationKey, untrusted: Callable[[], Untrusted | None] = lambda: None
    ) -> Send:
        """What a turn's tools show the user with (send_message, a result's for_user text):
        as an answer is shown at that point of the turn (`untrusted()`: chat/_untrusted.py)."""

        async def send(text: str) -> None:
            await self.say(key.channel, key.chat_id, text, None, untrusted=untrusted())

        return send

    def file_sender(self, key: ConversationKey) -> SendFiles:
        async def send(files: Sequence[File]) -> str:
            return await send_files(self.channels.get(key.channel), key.chat_id, files)

        return send


_REFUSED = {
    "path": N_(
        "⚠️ The language model's server is set at the wrong address (its base_url is missing "
        "/v1), so I cannot answer. The bot's owner needs to fix [llm] base_url. Your message is "
        "saved."
    ),
    "model": N_(
        "⚠️ The language model's server does not know the model this bot is set to use, so I "
        "cannot answer. The bot's owner needs to check [llm] model. Your message is saved."
    ),
    "template": N_(
        "⚠️ The language model's server refused this conversation's format (its chat "
        "template). Your message is saved; the bot's owner can see why in the log, and /reset "
        "starts a fresh conversation."
    ),
    "request": N_(
        "⚠️ The language model's server refused this request as invalid. Your message is "
        "saved; the bot's owner can see why in the log (a model option, or the request's size)."
    ),
}


def apology(exc: LLMError, language: str | None = None) -> str:
    """What the user reads when the model failed: relaybot's own words, no provider detail, in
    `language`."""
    return translator(language).gettext(_apology(exc))


def _apology(exc: LLMError) -> str:
    if isinstance(exc, PromptTooLarge):
        return N_(
            "⚠️ The language model's context window is too small even for my instructions and "
            "tools, so I cannot answer. The bot's owner needs to set a larger [llm] "
            "context_window (or use a model with a larger one) or offer fewer tools. Your "
            "message is saved."
        )
    if isinstance(exc, ContextOverflow):
        return N_(
            "⚠️ This did not fit the language model's context window, even with the conversation "
            "condensed. Your message is saved; ask for less at once (fewer or smaller pages, "
            "files or results), or send /reset to start a fresh conversation."
        )
    if isinstance(exc, ModelAuthError):
        return N_(
            "⚠️ The language model refused this bot's credentials, so I cannot answer. The bot's "
            "owner needs to check its API key. Your message is saved."
        )
    if isinstance(exc, ModelRateLimited):
        return N_(
            "⚠️ The language model is busy right now (rate limited). Your message is saved; "
            "please try again in a minute."
        )
    if isinstance(exc, ModelRefused):
        return _REFUSED.get(exc.kind, _REFUSED["request"])
    if isinstance(exc, ModelServerError):
        return N_(
            "⚠️ The language model's server failed on this request (a server error). Your "
            "message is saved; please try again later."
        )
    if isinstance(exc, ModelTimedOut):
        return N_(
            "⚠️ The language model took too long to answer. Your message is saved; please try "
            "again, or ask for something shorter."
        )
    return N_(
        "⚠️ I can't reach the language model right now. Your message is saved; please try "
        "again in a moment."
    )
