"""Which language relaybot's own words take in a chat (engine.i18n holds the words).

The order: the chat's own choice (/settings language), else the language the platform says the
user has (Telegram's ``language_code``, Discord's locale) when relaybot has it, else
``[engine] language``. The dispatcher settles it where a message, a command or a press comes in
(:meth:`Languages.settle`), so the parts answering it read ``msg.language`` only.

What the platform said is remembered per user (in memory, bounded) for the words a turn writes
later (an apology, a confirmation prompt, a scheduled run's note), where no event says it. After
a restart, until the user writes again, those follow the chat's choice or the default.
"""

from __future__ import annotations

from collections.abc import Callable

from engine.i18n import supported
from engine.loop import ConversationKey

_MAX_HEARD = 10_000  # users whose language is remembered; past it the memory starts afresh


class Languages:
    def __init__(
        self, default: Callable[[], str], chosen: Callable[[ConversationKey], str | None]
    ) -> None:
        self.default = default  # [engine] language, as the settings in force say
        self.chosen = chosen  # a chat's /settings choice
        self._heard: dict[tuple[str, str], str] = {}

    def settle(self, channel: str, chat_id: str, user_id: str, said: str | None) -> str:
        """The language for a user's message, command or press in a chat, `said` being what
        the platform says of the user (remembered for later)."""
        spoken = supported(said)
        if spoken is not None and self._heard.get((channel, user_id)) != spoken:
            if len(self._heard) >= _MAX_HEARD:
                self._heard.clear()
            self._heard[(channel, user_id)] = spoken
        return self.of(ConversationKey(channel, chat_id), user_id)

    def of(self, key: ConversationKey, user_id: str = "") -> str:
        """The language of relaybot's words in a chat, for `user_id` when one is named."""
        chosen = supported(self.chosen(key))
        if chosen is not None:
            return chosen
        heard = self._heard.get((key.channel, user_id)) if user_id else None
        return heard or supported(self.default()) or "en"
