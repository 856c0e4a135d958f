"""Discord threads: where a conversation started by a mention goes on, with ``[discord]
reply_in_thread``.

A thread is a channel with its own id, so it is always a conversation of its own (the engine's
chat id is the thread's id), whoever started it. With ``reply_in_thread`` on, a mention in a
server's text channel starts a public thread on that message (named from its first words) and the
conversation moves there: the message is handed to the engine under the thread's id, so the answer
and everything after it goes to the thread. A thread started on a message has the message's id, so
a mention Discord delivers twice (a resumed gateway session) finds the thread the first delivery
started (Discord answers the second start with code 160004) and the inbox takes it once. In a
thread the bot started, every message of an allowed user is for the bot, mention or not. Where no
thread can be started (no permission, say), the answer goes to the channel, as without the option.

A thread may be archived and locked, or deleted, before an answer is ready: Discord then refuses
the post (codes 50083 and 10003) and the answer goes to the thread's channel with a note saying so
(:meth:`Threads.parent_of` knows the channel: from discord.py's cache, or from what this process
saw). The message it became is remembered, so later edits of it (streaming, a confirmation's
outcome) find it. A shard whose session was resumed (after a restart) got no GUILD_CREATE, so
discord.py knows its channels only by id: the channel a message came in is then fetched once
(:meth:`Threads.channel_of`), to tell a text channel and a thread the bot started.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import OrderedDict
from collections.abc import Callable
from typing import TypeVar

import discord

from engine import InboundMessage

log = logging.getLogger("channels.discord")

ALREADY_STARTED = 160004  # "A thread has already been created for this message"
THREAD_LOCKED = 50083  # a post in an archived thread that may not be unarchived
UNKNOWN_CHANNEL = 10003
NAME_WORDS = 8
NAME_LIMIT = 100  # Discord's limit for a thread's name
_KEPT = 1024  # threads whose channel is remembered; messages moved to a channel
GONE_NOTE = "(The thread this conversation was in is closed or deleted, so I answer here.)"
K = TypeVar("K")
V = TypeVar("V")


def thread_name(text: str, user_name: str) -> str:
    """A thread's name from the first words of the message that started it."""
    words = text.split()
    name = " ".join(words[:NAME_WORDS]) + (" …" if len(words) > NAME_WORDS else "")
    name = name or f"Conversation with {user_name}"
    return name if len(name) <= NAME_LIMIT else name[: NAME_LIMIT - 1].rstrip() + "…"


def gone(exc: discord.HTTPException) -> bool:
    """True when Discord refused a post because its thread is deleted or locked."""
    return exc.code in (THREAD_LOCKED, UNKNOWN_CHANNEL)


class Threads:
    """Starting threads on mentions, and where a thread's messages go when it is gone."""

    def __init__(self, client: Callable[[], discord.Client | None]) -> None:
        self._client = client
        self._parents: OrderedDict[int, int] = OrderedDict()  # thread id → its channel's id
        self.moved: OrderedDict[str, str] = OrderedDict()  # message id → the channel it is in
        self._noted: OrderedDict[str, None] = OrderedDict()  # threads whose move was said
        self._fetched: OrderedDict[int, object] = OrderedDict()  # channel id → as fetched

    async def channel_of(self, message: discord.Message) -> object:
        """The channel `message` came in; fetched once when discord.py knows only its id (a
        resumed shard's server), as it was then (its kind and owner do not change)."""
        channel = message.channel
        client = self._client()
        if not isinstance(channel, discord.PartialMessageable) or channel.guild_id is None:
            return channel
        if channel.id not in self._fetched and client is not None:
            try:
                _remember(self._fetched, channel.id, await client.fetch_channel(channel.id))
            except discord.HTTPException:
                return channel
        return self._fetched.get(channel.id, channel)

    async def own(self, message: discord.Message, me: discord.ClientUser) -> bool:
        """True for a message in a thread the bot started."""
        channel = await self.channel_of(message)
        return isinstance(channel, discord.Thread) and channel.owner_id == me.id

    async def start_for(self, message: discord.Message, msg: InboundMessage) -> InboundMessage:
        """`msg` moved into a thread started on `message` when it is a mention in a server's
        text channel; else `msg` as it is."""
        if not msg.mentioned:
            return msg
        channel = await self.channel_of(message)
        if not isinstance(channel, discord.TextChannel):
            return msg
        try:
            on = channel.get_partial_message(message.id)
            thread = await on.create_thread(name=thread_name(msg.text, msg.user_name))
            thread_id = thread.id
        except discord.HTTPException as exc:
            if exc.code != ALREADY_STARTED:
                log.warning(
                    "discord: could not start a thread in channel %s (%s); answering there",
                    message.channel.id,
                    exc.text or exc.status,
                )
                return msg
            thread_id = message.id  # a thread started on a message has its id
        _remember(self._parents, thread_id, message.channel.id)
        return dataclasses.replace(msg, chat_id=str(thread_id))

    async def parent_of(self, chat_id: str) -> int | None:
        """The channel of the thread `chat_id` (None: not a thread, or not known any more)."""
        thread_id = int(chat_id)
        if thread_id in self._parents:
            return self._parents[thread_id]
        client = self._client()
        channel = client.get_channel(thread_id) if client is not None else None
        if isinstance(channel, discord.Thread):
            return channel.parent_id
        if client is not None:
            try:
                fetched = await client.fetch_channel(thread_id)
            except discord.HTTPException:
                return None
            if isinstance(fetched, discord.Thread):
                return fetched.parent_id
        return None

    def moved_to(self, chat_id: str, message_id: str) -> str:
        """The channel message `message_id` of chat `chat_id` is in (moved out of a gone
        thread, or where the engine thinks it is)."""
        return self.moved.get(message_id, chat_id)

    def note_moved(self, message_id: str, channel_id: int) -> None:
        _remember(self.moved, message_id, str(channel_id))

    def first_move(self, chat_id: str) -> bool:
        """True the first time (in this process) a thread's messages go to its channel."""
        if chat_id in self._noted:
            return False
        _remember(self._noted, chat_id, None)
        return True


def _remember(kept: OrderedDict[K, V], key: K, value: V) -> None:
    kept[key] = value
    kept.move_to_end(key)
    while len(kept) > _KEPT:
        kept.popitem(last=False)
