"""What a user sees while a turn runs: the typing indicator and a reply that grows as it streams.

Where the channel has drafts (:meth:`Channel.draft`: Telegram's private chats), the growing reply
is an ephemeral preview, and the answer is sent once, as a message, by the turn's delivery; so a
crash mid-stream leaves nothing half-written (the stored answer is delivered once by recovery).
Where it has none, or refuses one, the reply is one message sent and edited as it grows: with no
link previews and no links while it grows (whether the answer follows untrusted content is known
at its end: chat/_untrusted.py), then as the finished answer is to be shown.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import AsyncIterator

from engine._channel import Channel, MessageRef, Untrusted
from engine._clock import monotonic

log = logging.getLogger(__name__)
_GROWING = Untrusted()  # a text still growing: no previews, no links (its taint is not known)


@contextlib.asynccontextmanager
async def typing(channel: Channel, chat_id: str) -> AsyncIterator[None]:
    """Show the typing indicator until the block exits, refreshed as the platform needs."""

    async def keep() -> None:
        await asyncio.sleep(0.3)  # a quick answer needs no indicator: save the platform call
        while True:
            try:
                await channel.typing(chat_id)
            except Exception as exc:
                log.debug("typing indicator failed: %s", exc)
            await asyncio.sleep(channel.capabilities.typing_interval_s)  # a timer, not a sync

    task = asyncio.create_task(keep(), name=f"typing-{chat_id}")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


class LiveReply:
    """One message edited as text streams in: plain while growing, formatted at the end; or,
    while the channel takes them, drafts of it, and no message until the answer is delivered.

    At most one edit (or draft) per `capabilities.edit_interval_s`, only when the text changed,
    never two requests in flight; the stream itself never waits for the platform.
    """

    def __init__(self, channel: Channel, chat_id: str, reply_to: str | None) -> None:
        self.channel = channel
        self.chat_id = chat_id
        self.reply_to = reply_to
        self.interval = channel.capabilities.edit_interval_s
        self.text = ""
        self._shown = ""
        self._ref: MessageRef | None = None
        self._last = 0.0
        self._push: asyncio.Task[None] | None = None
        self._draft_id: int | None = secrets.randbelow(2**31 - 1) + 1  # None: no drafts here

    async def on_text(self, delta: str) -> None:
        self.text += delta
        if self._push is None and monotonic() - self._last >= self.interval:
            self._push = asyncio.create_task(self._flush())

    async def _flush(self) -> None:
        text = self.text
        try:
            if self._draft_id is not None and await self._draft(self._draft_id, text):
                return
            if self._ref is None:
                self._ref = await self.channel.send(
                    self.chat_id, text, reply_to=self.reply_to, formatted=False, untrusted=_GROWING
                )
            elif text != self._shown:
                await self.channel.edit(self._ref, text, formatted=False, untrusted=_GROWING)
            self._shown = text
        except Exception as exc:
            log.warning("streaming edit failed: %s", exc)
        finally:
            self._last = monotonic()
            self._push = None

    async def _draft(self, draft_id: int, text: str) -> bool:
        """Show `text` as a draft; False (from then on) when the channel has none or refuses."""
        if text == self._shown:
            return True
        try:
            if await self.channel.draft(self.chat_id, draft_id, text):
                self._shown = text
                return True
        except Exception as exc:
            log.info("no draft in %s (%s); the answer streams as a message", self.chat_id, exc)
        self._draft_id = None
        self._shown = ""
        return False

    @property
    def ref(self) -> MessageRef | None:
        """The message the reply is shown in, once the first part went out."""
        return self._ref

    async def finish(self, final: str, untrusted: Untrusted | None = None) -> bool:
        """Put the final, formatted text in place (`untrusted`: it follows untrusted content).
        False if no message shows it yet (nothing was shown, or only drafts): then the caller
        sends it."""
        if self._push is not None:
            await self._push
        if self._ref is None:
            return False
        await self.channel.edit(self._ref, final, formatted=True, untrusted=untrusted)
        return True

    async def abandon(self) -> None:
        if self._push is not None:
            self._push.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._push
