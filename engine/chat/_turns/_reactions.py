"""Status reactions: a turn's status on the messages it answers (👀 while it runs, taken off
once they are answered, a warning when it failed), shown by the channel (:meth:`Channel.react`,
opt-in per channel with ``status_reactions``).

They never hold up a turn: :meth:`StatusReactions.show` only notes what each message should show
and returns. One task per chat (spawned on the shared :class:`engine.work.Tasks`) asks the
channel, one request at a time, in the order the statuses changed, and always for a message's
newest status: one overtaken meanwhile is skipped (a turn answered before its 👀 went out costs no
request at all). One request at a time per chat also keeps a chat's statuses in order where the
platform folds messages together (Telegram reacts to an album's first message, whichever part is
named), and leaves rate limits to the adapter's library (PTB waits out Telegram's 429s,
discord.py its buckets). A failure to react (no permission in a group, reactions restricted
there, the message deleted) is logged once per chat, then quietly.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from engine._channel import Channel, Reaction
from engine.work import Tasks

log = logging.getLogger(__name__)

_TOLD_MAX = 1024  # chats whose failure to react was logged (then forgotten, to stay bounded)


@dataclass(slots=True)
class _Chat:
    """The statuses of one chat's messages still to show, or shown and not settled."""

    wanted: dict[str, Reaction] = field(default_factory=dict)  # message id → newest status
    shown: dict[str, Reaction] = field(default_factory=dict)  # what the channel was asked last
    changed: OrderedDict[str, None] = field(default_factory=OrderedDict)  # oldest change first
    busy: bool = False  # a task is asking the channel


class StatusReactions:
    """What each answered message should show, and the tasks that show it."""

    def __init__(self, channels: Mapping[str, Channel], tasks: Tasks) -> None:
        self.channels = channels
        self.tasks = tasks
        self._chats: dict[tuple[str, str], _Chat] = {}
        self._told: set[tuple[str, str]] = set()

    def show(
        self, channel: str, chat_id: str, message_ids: Sequence[str], reaction: Reaction
    ) -> None:
        """`message_ids` in `chat_id` should show `reaction` (never waits)."""
        if channel not in self.channels or not message_ids:
            return
        key = (channel, chat_id)
        chat = self._chats.setdefault(key, _Chat())
        for message_id in message_ids:
            chat.wanted[message_id] = reaction
            chat.changed[message_id] = None
            chat.changed.move_to_end(message_id)
        if not chat.busy:
            chat.busy = True
            self.tasks.spawn(self._work(key, chat), f"react-{channel}-{chat_id}")

    async def _work(self, key: tuple[str, str], chat: _Chat) -> None:
        channel_name, chat_id = key
        try:
            while chat.changed:
                message_id, _ = chat.changed.popitem(last=False)
                want = chat.wanted[message_id]
                channel = self.channels.get(channel_name)
                if channel is not None and want is not chat.shown.get(message_id, Reaction.DONE):
                    try:
                        await channel.react(chat_id, message_id, want)
                    except Exception as exc:
                        self._failed(channel_name, chat_id, exc)
                    chat.shown[message_id] = want  # tried: a failure is not asked again
                if message_id not in chat.changed and want is not Reaction.WORKING:
                    del chat.wanted[message_id]  # settled: nothing more will change it
                    chat.shown.pop(message_id, None)
        finally:
            chat.busy = False
            if not chat.wanted and self._chats.get(key) is chat:
                del self._chats[key]

    def _failed(self, channel: str, chat_id: str, exc: Exception) -> None:
        where = (channel, chat_id)
        if where in self._told:
            log.debug("could not react in %s:%s: %s", channel, chat_id, exc)
            return
        if len(self._told) >= _TOLD_MAX:
            self._told.clear()
        self._told.add(where)
        log.warning(
            "could not show a status reaction in %s:%s (%s: %s); not said again for this chat",
            channel,
            chat_id,
            type(exc).__name__,
            exc,
        )
