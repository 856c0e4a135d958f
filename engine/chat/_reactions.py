"""Status reactions: a turn's status on the messages it answers (👀 while it runs, taken off
once they are answered, a warning when it failed), shown by the channel (:meth:`Channel.react`,
opt-in per channel with ``status_reactions``).

They never hold up a turn: :meth:`StatusReactions.show` only notes what each message should show
and returns; one task per message (spawned on the shared :class:`engine.work.Tasks`) asks the
channel, one request at a time, and always for the newest status, skipping those overtaken
meanwhile (a turn answered before its 👀 went out costs no request at all). So the platform sees
at most one request per message in flight, in order, and its rate limits are the adapter's
library's to honour (PTB waits out Telegram's 429s, discord.py its buckets). A failure to react
(no permission in a group, reactions restricted there) is logged once per chat, then quietly.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from engine._channel import Channel, Reaction
from engine.work import Tasks

log = logging.getLogger(__name__)

_TOLD_MAX = 1024  # chats whose failure to react was logged (then forgotten, to stay bounded)

_Key = tuple[str, str, str]  # channel, chat id, message id


@dataclass(slots=True)
class _Status:
    wanted: Reaction
    shown: Reaction = Reaction.DONE  # nothing of ours on the message yet
    busy: bool = False  # a task is asking the channel


class StatusReactions:
    """What each answered message should show, and the tasks that show it."""

    def __init__(self, channels: Mapping[str, Channel], tasks: Tasks) -> None:
        self.channels = channels
        self.tasks = tasks
        self._status: dict[_Key, _Status] = {}
        self._told: set[tuple[str, str]] = set()

    def show(
        self, channel: str, chat_id: str, message_ids: Sequence[str], reaction: Reaction
    ) -> None:
        """`message_ids` in `chat_id` should show `reaction` (never waits)."""
        if channel not in self.channels:
            return
        for message_id in dict.fromkeys(message_ids):
            key = (channel, chat_id, message_id)
            status = self._status.get(key)
            if status is None:
                status = self._status[key] = _Status(reaction)
            status.wanted = reaction
            if status.busy:
                continue  # the task in flight takes the newest status next
            if status.wanted is status.shown:
                if reaction is not Reaction.WORKING:
                    del self._status[key]
                continue
            status.busy = True
            self.tasks.spawn(self._apply(key, status), f"react-{chat_id}-{message_id}")

    async def _apply(self, key: _Key, status: _Status) -> None:
        channel_name, chat_id, message_id = key
        try:
            while status.wanted is not status.shown:
                want = status.wanted
                channel = self.channels.get(channel_name)
                if channel is None:
                    break
                try:
                    await channel.react(chat_id, message_id, want)
                except Exception as exc:
                    self._failed(channel_name, chat_id, exc)
                status.shown = want  # tried: a failure is not asked again
        finally:
            status.busy = False
            if self._status.get(key) is status and status.wanted is not Reaction.WORKING:
                del self._status[key]  # settled: nothing more will change it

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
