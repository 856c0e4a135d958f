"""Each chat's own settings: a persona, a model, (in groups) which messages it answers,
(with [media] speech_model) when its answers are spoken too, the language of relaybot's own
words (chat/_languages.py), and whether a short view of the model's reasoning is shown.

/settings shows and changes them (engine/chat/_commands/_settings_menu.py); here they are read
and kept.

A place inside a chat (a Telegram topic, :func:`engine.chat_of`) has the settings of its chat
until /settings there gives it its own.

The settings of every chat that has any are kept in memory (loaded at start-up, written through
to the store), because two of them are read on hot paths: the reply mode for every group message
an adapter sees (:meth:`ChatSettings.listens`, synchronous), and the persona and model for every
turn. A chat without settings costs one dictionary lookup, so the default behaviour is as before.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence

from engine._channel import Channel, InboundMessage, chat_of
from engine.chat._settings._languages import Languages
from engine.chat._settings._live import Policy
from engine.loop import ConversationKey
from engine.store import ChatPrefs, ReplyMode, Store

log = logging.getLogger(__name__)


class ChatSettings:
    def __init__(
        self,
        store: Store,
        channels: Mapping[str, Channel],
        policy: Policy,
        models: Callable[[], Sequence[str]],
        default_model: Callable[[], str],
        changed: Callable[[], Awaitable[None]] | None = None,
        language: Callable[[], str] = lambda: "en",
        speaks: bool = False,
    ) -> None:
        self.rows = store.chat_settings
        self.speaks = speaks  # answers can be spoken: the voice replies choice is offered
        self.channels = channels
        self.policy = policy
        self._models = models  # [llm] models_allowed in force (a reload changes them)
        self._default_model = default_model  # the model in force's name
        self._prefs: dict[ConversationKey, ChatPrefs] = {}
        self._all: set[ConversationKey] = set()  # chats whose reply mode is "all"
        self.changed = changed  # told to the other instances sharing the store
        self.languages = Languages(language, lambda key: self.of(key).language)

    @property
    def models(self) -> Sequence[str]:
        """The models a chat may choose (`[llm] models_allowed`), as now in force."""
        return self._models()

    @property
    def default_model(self) -> str:
        return self._default_model()

    async def load(self) -> None:
        """Read every chat's settings (again: what is no longer stored is forgotten)."""
        rows = await self.rows.all()
        self._prefs.clear()
        self._all.clear()
        for prefs in rows:
            self._remember(prefs)

    def drop(self, chats: Iterable[tuple[str, str]]) -> None:
        """Forget these chats' settings (their rows are gone: /forget_me)."""
        for channel, chat_id in chats:
            key = ConversationKey(channel, chat_id)
            self._prefs.pop(key, None)
            self._all.discard(key)

    # -- read on hot paths ----------------------------------------------------------------

    def of(self, key: ConversationKey) -> ChatPrefs:
        own = self._prefs.get(key)
        if own is not None:
            return own
        chat = chat_of(key.chat_id)
        inherited = (
            self._prefs.get(ConversationKey(key.channel, chat)) if chat != key.chat_id else None
        )
        if inherited is not None:  # a topic without settings of its own: its group's
            return dataclasses.replace(inherited, chat_id=key.chat_id)
        return ChatPrefs(key.channel, key.chat_id)

    def model(self, key: ConversationKey) -> str | None:
        """The model this chat's turns use (None: the default), if it is still allowed."""
        chosen = self.of(key).model
        return chosen if chosen in self.models else None

    def listens(self, channel: str, chat_id: str) -> bool:
        """True when the chat asked for every group message (an adapter then delivers them)."""
        if not self._all:
            return False
        key = ConversationKey(channel, chat_id)
        return key in self._all or self.of(key).reply_mode is ReplyMode.ALL

    def drops(self, msg: InboundMessage) -> bool:
        """True for a group message not addressed to the bot, in a chat set to mentions only
        (the adapter delivered it because its own config answers every message)."""
        if msg.is_private or msg.mentioned or not self._prefs:
            return False
        return self.of(ConversationKey(msg.channel, msg.chat_id)).reply_mode is ReplyMode.MENTIONS

    async def save(self, prefs: ChatPrefs, user_id: str) -> None:
        """Store `prefs` (changed by `user_id`), keep them, and tell the other instances."""
        await self.rows.save(prefs, user_id)
        self._remember(prefs)
        if self.changed is not None:
            await self.changed()

    def _remember(self, prefs: ChatPrefs) -> None:
        key = ConversationKey(prefs.channel, prefs.chat_id)
        self._prefs[key] = prefs
        if prefs.reply_mode is ReplyMode.ALL:
            self._all.add(key)
        else:
            self._all.discard(key)
