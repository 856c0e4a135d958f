"""Other bots in groups: which are answered (``[access] bots``), and the loop guard that keeps two
bots that answer each other from running away.

A message whose author is a bot (Telegram's bot-to-bot messages since Bot API 10.0, a Discord
bot's) is dropped unless that bot is listed, by id or by @username, it came in a group, and it is
addressed to us (a mention, or a reply to our message), whatever the chat's reply mode: a
listed bot is let in without pairing, and never gets a refusal or a notice (a bot answering
those is how loops start). What a listed bot says is then held by the guard, per chat:

- at most `per_minute` bot-originated turns in any 60 seconds;
- never an answer to a bot's message that is the `chain`+1-th in a row answering us (a reply
  to the bot's own message, with no person's message in between);
- when either trips, the chat hears no bot for `cooldown_s`, and the log says so in one line
  (the trip, not each message dropped after it).

A person's message in the chat ends a chain. The guard's state is this process's, in memory:
a restart forgets it, which at worst lets one more round through. Time is the monotonic clock
(a length of time inside the process), passed in so that a test moves it.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from engine._channel import InboundMessage
from engine._clock import monotonic
from engine.chat._settings._sections import BotSettings

log = logging.getLogger(__name__)

_WINDOW_S = 60.0
_CHATS = 1024  # chats whose guard state is kept; past it, those at rest are forgotten


@dataclass(slots=True)
class _Chat:
    turns: deque[float] = field(default_factory=deque)  # when bot turns were let in, last minute
    chain: int = 0  # bot messages in a row that answer us
    quiet_until: float = 0.0  # the cool-down's end


class BotGuard:
    """Decides, per message, whether a bot's message is answered. `settings()` reads the
    settings in force (a reload changes them at the next message)."""

    def __init__(
        self, settings: Callable[[], BotSettings], now: Callable[[], float] = monotonic
    ) -> None:
        self._settings = settings
        self._now = now
        self._chats: dict[tuple[str, str], _Chat] = {}  # bounded by the chats bots speak in

    def admit(self, msg: InboundMessage) -> bool:
        """True when `msg` is to be answered. A person's message is, and ends the chat's chain;
        a bot's only as the module docstring says."""
        key = (msg.channel, msg.chat_id)
        if not msg.from_bot:
            if (chat := self._chats.get(key)) is not None:
                chat.chain = 0
            return True
        settings = self._settings()
        if msg.is_private or not msg.mentioned or not settings.lets_in(msg):
            log.debug("a message of bot %s:%s was dropped (not in [access] bots)", *key)
            return False
        now = self._now()
        if key not in self._chats and len(self._chats) >= _CHATS:
            self._forget_resting(now)
        chat = self._chats.setdefault(key, _Chat())
        if now < chat.quiet_until:
            return False
        while chat.turns and chat.turns[0] <= now - _WINDOW_S:
            chat.turns.popleft()
        answers_us = msg.quote is not None and msg.quote.by_bot
        chain = chat.chain + 1 if answers_us else 0
        if chain > settings.chain or len(chat.turns) >= settings.per_minute:
            why = (
                f"{chain} bot messages in a row answered us"
                if chain > settings.chain
                else f"{len(chat.turns)} bot turns in the last minute"
            )
            chat.quiet_until, chat.chain = now + settings.cooldown_s, 0
            chat.turns.clear()
            log.warning(
                "bot loop guard tripped in %s:%s (%s): no bot is answered there for %gs",
                msg.channel,
                msg.chat_id,
                why,
                settings.cooldown_s,
            )
            return False
        chat.chain = chain
        chat.turns.append(now)
        return True

    def _forget_resting(self, now: float) -> None:
        """Drop the state of chats with no cool-down running and no bot turn this minute."""
        for key, chat in list(self._chats.items()):
            if chat.quiet_until <= now and (not chat.turns or chat.turns[-1] <= now - _WINDOW_S):
                del self._chats[key]
