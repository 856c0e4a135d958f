"""What travels between an adapter and the engine about messages: an inbound message and its
attachments (what the platform says about them and its reference, never the bytes), a file to
send, the platform's id of a message shown, a turn's status shown on a message, and what a
platform can do.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from urllib.parse import urlsplit


class MediaKind(enum.StrEnum):
    """What an attachment is, as far as the platform tells: the engine decides the rest."""

    IMAGE = "image"  # a photo, a static sticker, an image file
    AUDIO = "audio"  # a voice note or an audio file
    FILE = "file"  # any other file (a text file, an archive, a video, ...)


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file that came with a message: what the platform says about it, and its reference."""

    kind: MediaKind
    name: str  # a file name ("photo.jpg" when the platform gives none)
    mime_type: str  # "" when the platform does not say
    size: int | None  # in bytes, as the platform reports it (None: not told)
    ref: str  # how the adapter fetches it: Telegram's file_id, Discord's attachment URL
    duration_s: float | None = None  # a voice note's or audio file's length, when told


@dataclass(frozen=True, slots=True)
class OutgoingFile:
    """A file the bot sends: its name, MIME type and content."""

    name: str
    mime_type: str
    data: bytes


@dataclass(frozen=True, slots=True)
class Quote:
    """The message a user replied to, as the platform shows it: who wrote it, its text (or a
    caption) and the kinds of what it carried. The engine bounds and marks it for the model."""

    author: str  # a display name, never an id
    text: str
    attachments: tuple[MediaKind, ...] = ()
    by_bot: bool = False  # the bot's own message


PLACE_SEP = "/"  # a place inside a chat: "<chat>/<place>" (a Telegram forum topic)


def chat_of(chat_id: str) -> str:
    """The chat a conversation's chat id is in: itself, or for a place inside a chat (a
    Telegram topic, ``"<chat>/<topic>"``) the chat's own id. Such a place is a conversation of
    its own everywhere; it falls back on its chat only for the chat's /settings."""
    return chat_id.partition(PLACE_SEP)[0]


@dataclass(frozen=True, slots=True)
class InboundMessage:
    """One user message, normalised across platforms."""

    channel: str  # "telegram", "discord", "console"
    chat_id: str  # the conversation: a Telegram chat (or "<chat>/<topic>"), a Discord channel/DM
    user_id: str
    user_name: str
    text: str
    message_id: str  # platform message/update id, unique per channel (redelivery de-duplication)
    is_private: bool = True
    mentioned: bool = False
    reply_to: str | None = None  # platform id of the message this one replies to
    attachments: tuple[Attachment, ...] = ()
    group_id: str | None = None  # messages sent as one (a Telegram album) share this id
    quote: Quote | None = None  # the message this one replies to, when the platform shows it
    username: str | None = None  # the platform handle (Telegram's @name, Discord's name)
    language: str | None = None  # the user's language as the platform says ("de", "es-ES")
    forwarded_from: str | None = None  # a forwarded message: who wrote it (a name, never an id)
    from_bot: bool = False  # the author is another bot (answered only as [access] bots lets)


@dataclass(frozen=True, slots=True)
class Untrusted:
    """How to show an answer written after the model read text nobody in the chat wrote (a web
    page, a search result, a tool's output, another member's message): with no link previews,
    and with a link or a picture only where trusted text (the requester's words, the owner's
    configuration) named its host. Any other link is shown as text that is not fetchable and
    not linked by the platform, so a URL an injected instruction built (with the user's data in
    its query) leaves only when the user copies it by hand.

    `hosts` are the hosts trusted text named, lower case; `sources` say briefly what untrusted
    content came before ("example.org/page").
    """

    hosts: frozenset[str] = frozenset()
    sources: tuple[str, ...] = ()

    def links_to(self, url: str) -> bool:
        """True when `url` may be shown as a link: http(s) to a host trusted text named."""
        try:
            parts = urlsplit(url.strip())
            host = (parts.hostname or "").removeprefix("www.")
        except ValueError:  # a malformed port or address
            return False
        return parts.scheme.lower() in ("http", "https") and bool(host) and host in self.hosts


@dataclass(frozen=True, slots=True)
class MessageRef:
    """Where a message the bot sent lives, so it can be edited later."""

    chat_id: str
    message_id: str


class Reaction(enum.Enum):
    """A turn's status, shown on a message it answers (:meth:`Channel.react`)."""

    WORKING = "working"  # a turn started on it (👀)
    DONE = "done"  # answered: the status is taken off again
    FAILED = "failed"  # the turn failed (a warning sign)


@dataclass(frozen=True, slots=True)
class Capabilities:
    max_message_length: int
    buttons: bool
    edits: bool
    markdown: str  # "telegram-html", "discord", "plain"
    edit_interval_s: float = 1.0  # streaming: at most one edit per this many seconds per chat
    typing_interval_s: float = 4.0  # how often the typing indicator must be refreshed
