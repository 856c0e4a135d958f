"""Telegram forum topics (and topics in private chats) as conversations of their own.

A message in a topic carries the topic's id (``message_thread_id``, with ``is_topic_message``);
everything sent for it must carry that id too, or it lands in the General topic. The model chosen
here: the engine's chat id of a topic is ``"<chat>/<topic>"`` (``"-1001234/77"``), and only this
adapter reads it apart when it calls the Bot API. Why this, rather than a thread field through
:class:`engine.InboundMessage`, the conversation key, the store and every :class:`engine.Channel`
method: every place the engine keeps or passes a chat (conversations, the inbox, deliveries,
confirmations, background jobs, schedules, reminders, grants, the per-chat queues and leases)
already keys on the chat id, so a topic is a conversation in all of them at once, and whatever
the engine sends later, after a restart included, finds its topic from the one value it stored.
A separate field would have to be carried, stored and migrated in each of those places, and one
forgotten path sends to General. The General topic and chats without topics keep their plain
chat id, so their conversations go on with the history they had. The engine knows only that a
chat id may name a place inside a chat (:func:`engine.chat_of`), which lets a topic fall back on
its group's /settings.

Only ``is_topic_message`` says a message is in a topic: in a group without topics,
``message_thread_id`` marks a reply thread, which is not a conversation of its own. In a topic, a
message that replies to nothing has the topic's opening service message as ``reply_to_message``:
that is no reply (:func:`replied_to`).
"""

from __future__ import annotations

from telegram import Message

SEP = "/"


def chat_key(chat_id: int | str, topic: int | None) -> str:
    """The engine's chat id of `topic` in `chat_id` (the chat's own id without a topic)."""
    return f"{chat_id}{SEP}{topic}" if topic else str(chat_id)


def key_of(message: Message) -> str:
    """The engine's chat id of the conversation `message` belongs to."""
    return chat_key(message.chat_id, topic_of(message))


def topic_of(message: object) -> int | None:
    """The topic `message` is in; None for General, a chat without topics, or a message that
    is not accessible any more (a button pressed on an old one)."""
    if not getattr(message, "is_topic_message", False):
        return None
    thread = getattr(message, "message_thread_id", None)
    return thread if isinstance(thread, int) else None


def place(chat_key_: str) -> tuple[int | str, int | None]:
    """The Bot API's chat_id and message_thread_id of an engine chat id."""
    chat, _, topic = chat_key_.partition(SEP)
    chat_id: int | str = int(chat) if chat.lstrip("-").isdigit() else chat
    return chat_id, int(topic) if topic.isdigit() else None


def replied_to(message: Message) -> Message | None:
    """The message `message` really replies to: not a topic's opening message, which Telegram
    gives as the reply of every message in the topic that replies to nothing."""
    reply = message.reply_to_message
    if reply is None:
        return None
    topic = topic_of(message)
    if reply.forum_topic_created is not None or (topic is not None and reply.message_id == topic):
        return None
    return reply
