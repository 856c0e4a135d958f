"""A new message's way in: checked (the group listens, another bot is let in (chat/_bots.py),
the user is allowed (a stranger may ask to be: chat/_pairing.py), the length, the media limits,
the user's rate and budget), committed to the inbox, and queued for its chat. A refusal is
answered at once, out of the chat's order. Messages held by the rate limit are queued when their
hold ends (one timer per chat); an album's parts are queued once its last part is in.
"""

from __future__ import annotations

import asyncio
import logging

from engine import metrics
from engine._channel import InboundMessage
from engine._clock import wall
from engine.chat._access._bots import BotGuard
from engine.chat._access._limits import Limits
from engine.chat._access._pairing import Pairing
from engine.chat._intake._albums import Albums
from engine.chat._intake._media import MediaIntake
from engine.chat._intake._quotes import quoted
from engine.chat._settings._chat import ChatSettings
from engine.chat._settings._live import Live
from engine.chat._turns._notices import Notices
from engine.i18n import translator
from engine.loop import ConversationKey
from engine.store import Store
from engine.work import ChatQueues, Inbound, Tasks

log = logging.getLogger(__name__)


class Intake:
    def __init__(
        self,
        store: Store,
        queues: ChatQueues,
        notices: Notices,
        tasks: Tasks,
        chat_settings: ChatSettings,
        media: MediaIntake,
        limits: Limits,
        pairing: Pairing,
        live: Live,
    ) -> None:
        self.store = store
        self.queues = queues
        self.notices = notices
        self.tasks = tasks
        self.chat_settings = chat_settings
        self.media = media
        self.limits = limits
        self.pairing = pairing
        self.live = live
        self.albums = Albums()
        self.bots = BotGuard(lambda: self.live.settings.bots)
        self._releases: dict[ConversationKey, asyncio.TimerHandle] = {}

    async def handle(self, msg: InboundMessage) -> None:
        if self.chat_settings.drops(msg):  # a group set to mentions only
            return
        if not self.bots.admit(msg):  # another bot: only as [access] bots and the guard let
            return
        if not msg.from_bot and not await self._allowed(msg):  # a listed bot needs no pairing
            return
        limit = self.live.settings.max_message_chars
        if len(msg.text) > limit:
            log.info(
                "refused a %d-character message in %s:%s", len(msg.text), msg.channel, msg.chat_id
            )
            metrics.refused(msg.channel, "too_long")
            too_long = translator(msg.language).gettext(
                "⚠️ Your message is too long for me ({length} characters; the limit is {limit}). "
                "Please shorten it, or split it into several messages."
            )
            self._reply(msg, too_long.format(length=f"{len(msg.text):,}", limit=f"{limit:,}"))
            return
        key = ConversationKey(msg.channel, msg.chat_id)
        if (refused := self.media.refusal(msg)) is not None:
            metrics.refused(msg.channel, "media")
            if msg.group_id is None or self.albums.first_refusal(key, msg.group_id):
                self._reply(msg, refused)
            return
        admission = await self.limits.admit(msg)
        if admission.reply is not None:
            self._reply(msg, admission.reply)
        if admission.refuse:
            metrics.refused(msg.channel, "rate_limit")
            return
        quote = quoted(msg.quote, self.live.settings.max_quote_chars)
        if not await self.store.inbox.accept(msg, hold_until=admission.hold_until, quote=quote):
            log.info("duplicate delivery of %s message %s ignored", msg.channel, msg.message_id)
            return
        metrics.received(msg.channel)
        if admission.hold_until is not None:
            await self.schedule_release(key)
        elif msg.group_id is not None:  # an album: one turn once its last part is in
            self.albums.hold(key, msg.group_id, lambda: self._queue(key))
        else:
            self._queue(key)

    async def _allowed(self, msg: InboundMessage) -> bool:
        """Whether the user may use the bot; a stranger is told (and may ask: pairing)."""
        if self.pairing.allowed(msg.channel, msg.user_id):
            return True
        if await self.pairing.recheck(msg.channel, msg.user_id):
            return True
        if (text := await self.pairing.refusal(msg)) is not None:
            self._reply(msg, text)
        return False

    async def schedule_release(self, key: ConversationKey) -> None:
        """Queue the chat's held messages for when their hold ends (one timer per chat)."""
        when = await self.store.inbox.next_release(key.channel, key.chat_id)
        if when is None:
            return
        loop = asyncio.get_running_loop()
        timer = self._releases.get(key)
        at = loop.time() + max(0.0, when - wall())
        if timer is not None and not timer.cancelled() and timer.when() <= at:
            return
        if timer is not None:
            timer.cancel()

        def release() -> None:
            self._releases.pop(key, None)
            self._queue(key)

        self._releases[key] = loop.call_at(at, release)

    def _queue(self, key: ConversationKey) -> None:
        self.queues.put(key, Inbound())

    def close(self) -> None:
        """No more releases and albums: the daemon stops (what they hold stays in the inbox)."""
        for timer in self._releases.values():
            timer.cancel()
        self.albums.close()

    def _reply(self, msg: InboundMessage, text: str) -> None:
        """Answer outside the chat's order (a refusal): the adapter's delivery is not held up.
        Never to a bot: a bot that answers notices is how loops start."""
        if msg.from_bot:
            return
        reply = self.notices.say(msg.channel, msg.chat_id, text, msg.message_id, to=msg.user_id)
        self.tasks.spawn(reply, "refusal")
