"""Pictures, files and voice from users: what is accepted, within which limits, and what each
becomes for the model.

Two steps, each where it belongs:

1. :func:`refusal`, at the door (``Dispatcher.handle_inbound``), judges a message by what the
   platform says about its attachments (type, size, length, count). A refused message gets a
   short reply naming the limit or the accepted types and is not stored: nothing reaches the model.
2. :meth:`MediaIntake.take`, when the chat's turn begins, fetches what the queued messages carry
   (through the channel's own file API, with a timeout), reads text files, transcribes voice,
   and moves the messages into the conversation in one transaction: a picture as an
   :class:`Image` part that keeps only its platform reference (its bytes wait in the cache of
   ``_media_history``), a text file as text under its name, a voice note as its transcript,
   which is shown back to the user. What turns out over a limit or unreadable only now is
   refused the same way. It runs again after a restart, from the references in the inbox.

The parts of an album come as separate messages; :class:`Albums` starts their turn once the last
part is in, so they are taken together.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from engine._channel import Attachment, Channel, InboundMessage, MediaKind
from engine.chat._live import typing
from engine.chat._spend import Meter, charging
from engine.context import DOWNLOAD_TIMEOUT_S, ImageCache, human_size
from engine.i18n import translator
from engine.loop import ConversationKey
from engine.models import Image, Message, Part, Role, Text, Transcriber
from engine.store import Conversation, InboxRow, Store
from tools.errors import LLMError

log = logging.getLogger(__name__)

Say = Callable[[str, str, str, str | None], Awaitable[None]]  # channel, chat, text, reply_to

MB = 1024 * 1024
MAX_AUDIO_BYTES = 25 * MB  # what OpenAI's /audio/transcriptions takes
TRANSCRIPT_SHOWN = 300  # characters of the transcript shown back to the user

IMAGE_TYPES = {"image/jpeg": "JPEG", "image/png": "PNG", "image/gif": "GIF", "image/webp": "WebP"}
TEXT_TYPES = frozenset(
    {"application/json", "application/xml", "application/x-yaml", "application/yaml"}
    | {"application/toml", "application/javascript", "application/x-sh", "application/sql"}
)
TEXT_SUFFIXES = frozenset(
    ".txt .md .markdown .rst .csv .tsv .json .jsonl .yaml .yml .toml .ini .cfg .conf .log .xml"
    " .html .htm .css .py .js .ts .tsx .jsx .go .rs .java .kt .c .h .cc .cpp .hpp .cs .rb .php"
    " .sh .bash .zsh .sql .r .swift .lua .pl .tex .env .diff .patch .srt .vtt".split()
)


@dataclass(frozen=True, slots=True)
class MediaSettings:
    """``[media]`` and ``[llm] vision``: what is accepted, and how much of it."""

    vision: bool = False
    max_image_mb: float = 10.0
    max_images_per_turn: int = 4
    max_text_kb: int = 200
    max_audio_s: int = 300
    max_speech_chars: int = 1_500  # of an answer spoken (engine/chat/_speech.py)

    @property
    def max_image_bytes(self) -> int:
        return int(self.max_image_mb * MB)

    @property
    def max_text_bytes(self) -> int:
        return self.max_text_kb * 1024


class Use(enum.Enum):
    """What relaybot does with an attachment."""

    IMAGE = "image"  # shown to the model as a picture
    TEXT = "text"  # read and given to the model as text under its name
    VOICE = "voice"  # transcribed; the transcript is the message
    NONE = "none"  # refused: not a type relaybot reads


def use_of(attachment: Attachment) -> Use:
    mime = attachment.mime_type.split(";")[0].strip().lower()
    suffix = PurePosixPath(attachment.name.lower()).suffix
    if attachment.kind is MediaKind.IMAGE:
        return Use.IMAGE if mime in IMAGE_TYPES or not mime else Use.NONE  # bytes tell later
    if attachment.kind is MediaKind.AUDIO:
        return Use.VOICE
    if mime.startswith("text/") or mime in TEXT_TYPES or suffix in TEXT_SUFFIXES:
        return Use.TEXT
    return Use.NONE


def accepted(settings: MediaSettings, transcribes: bool, _: Callable[[str], str] = str) -> str:
    """The kinds of files relaybot reads here, in words."""
    kinds = []
    if settings.vision:
        kinds.append(_("pictures ({types})").format(types=", ".join(IMAGE_TYPES.values())))
    kinds.append(_("text files (txt, md, csv, json, code)"))
    if transcribes:
        kinds.append(_("voice messages"))
    both = _("{some} and {last}")
    return both.format(some=", ".join(kinds[:-1]), last=kinds[-1]) if len(kinds) > 1 else kinds[0]


def refusal(
    settings: MediaSettings,
    attachments: Sequence[Attachment],
    transcribes: bool,
    language: str | None = None,
) -> str | None:
    """Why a message with `attachments` cannot be taken, judged by what the platform says about
    them (None: it can), in `language`. Nothing is downloaded."""
    _ = translator(language).gettext
    images = 0
    for a in attachments:
        use = use_of(a)
        if use is Use.NONE:
            kind = a.mime_type or _("an unknown type")
            cannot = _("⚠️ I can't read {name} ({kind}). I can read {accepted}.")
            return cannot.format(
                name=a.name, kind=kind, accepted=accepted(settings, transcribes, _)
            )
        if use is Use.IMAGE:
            if not settings.vision:
                return _(
                    "⚠️ The language model here cannot see images, so I can't look at your "
                    "picture. Please describe it in words."
                )
            if a.size is not None and a.size > settings.max_image_bytes:
                limit = _("{mb} MB per picture").format(mb=f"{settings.max_image_mb:g}")
                return _too_large(a.name, a.size, limit, _)
            images += 1
        elif use is Use.TEXT:
            if a.size is not None and a.size > settings.max_text_bytes:
                limit = _("{kb} KB per text file").format(kb=settings.max_text_kb)
                return _too_large(a.name, a.size, limit, _)
        elif not transcribes:
            return _("⚠️ Voice messages are not set up here (no transcription model). Please type.")
        elif a.duration_s is not None and a.duration_s > settings.max_audio_s:
            return _(
                "⚠️ That voice message is {length} long; I can listen to {limit} at most. Please "
                "send a shorter one."
            ).format(length=_duration(a.duration_s), limit=_duration(settings.max_audio_s))
    if images > settings.max_images_per_turn:
        return _too_many(images, settings.max_images_per_turn, _)
    return None


class _Refused(Exception):
    """An attachment failed a check that needed its content; the message is the user's reply."""


class MediaIntake:
    """Moves a chat's queued messages into its conversation, with what they carry."""

    def __init__(
        self,
        store: Store,
        channels: Mapping[str, Channel],
        settings: Callable[[], MediaSettings],
        cache: ImageCache,
        say: Say,
        transcriber: Transcriber | None = None,
        meter: Meter | None = None,
    ) -> None:
        self.store = store
        self.channels = channels
        self._settings = settings  # those in force (a reload changes them)
        self.cache = cache
        self.say = say
        self.transcriber = transcriber
        self.meter = meter  # a transcription is charged to whoever sent the voice note

    @property
    def settings(self) -> MediaSettings:
        return self._settings()

    def refusal(self, msg: InboundMessage) -> str | None:
        transcribes = self.transcriber is not None
        return refusal(self.settings, msg.attachments, transcribes, msg.language)

    async def take(
        self, key: ConversationKey, rows: list[InboxRow]
    ) -> tuple[Conversation, list[InboxRow]] | None:
        """Take the chat's queued messages that may be taken now (`rows`) as one turn; returns
        the conversation they went into and the rows taken (None when every one was refused)."""
        rows = await self._within_image_limit(key, rows)
        channel = self.channels.get(key.channel)
        shows = channel if channel is not None and any(r.attachments for r in rows) else None
        async with typing(shows, key.chat_id) if shows else contextlib.nullcontext():
            taken, heard = await self._messages(key, rows)
        if not taken:
            return None
        conv = await self.store.conversations.active(
            key.channel, key.chat_id, is_private=taken[-1][0].is_private
        )
        await self.store.inbox.take(conv.id, taken)
        for row, transcript in heard:  # what was understood, before the answer to it
            await self.say(key.channel, key.chat_id, _heard(transcript), row.message_id)
        return conv, [row for row, _ in taken]

    async def _messages(
        self, key: ConversationKey, rows: list[InboxRow]
    ) -> tuple[list[tuple[InboxRow, Message]], list[tuple[InboxRow, str]]]:
        """Each row's user message (the refused ones are answered and left out), and the
        transcripts to show back."""
        taken: list[tuple[InboxRow, Message]] = []
        heard: list[tuple[InboxRow, str]] = []
        for row in rows:
            try:
                with charging(self.meter, key.channel, key.chat_id, row.user_id):
                    msg, transcript = await self._message(key, row)
            except _Refused as exc:
                await self._refuse(key, [row], str(exc))
                continue
            taken.append((row, msg))
            if transcript:
                heard.append((row, transcript))
        return taken, heard

    async def _within_image_limit(
        self, key: ConversationKey, rows: list[InboxRow]
    ) -> list[InboxRow]:
        """An album counts as one message: over the limit, all its pictures are refused."""
        with_images = [r for r in rows if any(use_of(a) is Use.IMAGE for a in r.attachments)]
        count = sum(use_of(a) is Use.IMAGE for r in with_images for a in r.attachments)
        if count <= self.settings.max_images_per_turn:
            return rows
        await self._refuse(key, with_images, _too_many(count, self.settings.max_images_per_turn))
        return [r for r in rows if r not in with_images]

    async def _refuse(self, key: ConversationKey, rows: Sequence[InboxRow], text: str) -> None:
        log.info("refused %d message(s) with media in %s: %s", len(rows), key, text)
        await self.say(key.channel, key.chat_id, text, rows[0].message_id)
        await self.store.inbox.answered([r.id for r in rows])

    async def _message(self, key: ConversationKey, row: InboxRow) -> tuple[Message, str]:
        """The user message `row` becomes, and its transcript ("" without voice)."""
        reason = refusal(self.settings, row.attachments, self.transcriber is not None)
        if reason is not None:  # the settings changed since it came in (a restart between)
            raise _Refused(reason)
        texts = [row.text] if row.text else []
        images: list[Part] = []
        transcript = ""
        for a in row.attachments:
            use = use_of(a)
            if use is Use.IMAGE:
                images.append(await self._image(key, a))
            elif use is Use.TEXT:
                texts.append(await self._text(key, a))
            elif use is Use.VOICE:
                transcript = await self._transcript(key, a)
                texts.insert(0, transcript)
        text = "\n\n".join(texts)
        parts: list[Part] = [Text(text)] if text else []
        msg = Message(Role.USER, [*parts, *images], row.speaker, row.quote, row.provenance)
        return msg, transcript

    async def _image(self, key: ConversationKey, a: Attachment) -> Image:
        limit = self.settings.max_image_bytes
        data = await self._download(key, a, limit, f"{self.settings.max_image_mb:g} MB per picture")
        media_type = sniff_image(data)
        if media_type is None:
            raise _Refused(
                f"⚠️ {a.name} is not a picture I can read; I can read "
                f"{', '.join(IMAGE_TYPES.values())} pictures."
            )
        self.cache.put(key.channel, a.ref, data)
        return Image(media_type, name=a.name, ref=a.ref, size=len(data))

    async def _text(self, key: ConversationKey, a: Attachment) -> str:
        limit = self.settings.max_text_bytes
        data = await self._download(key, a, limit, f"{self.settings.max_text_kb} KB per text file")
        if b"\0" in data[:8192]:
            raise _Refused(f"⚠️ {a.name} does not look like a text file, so I can't read it.")
        text = data.decode("utf-8", errors="replace").removeprefix("\ufeff")
        return f"[file {a.name}, {human_size(len(data))}]\n{text}\n[end of {a.name}]"

    async def _transcript(self, key: ConversationKey, a: Attachment) -> str:
        assert self.transcriber is not None  # refusal() said so
        data = await self._download(key, a, MAX_AUDIO_BYTES, "25 MB per voice message")
        try:
            text = await self.transcriber.transcribe(a.name, data, a.mime_type, a.duration_s)
        except LLMError as exc:
            log.error("transcribing a voice message in %s failed: %s", key, exc)
            raise _Refused(
                "⚠️ I couldn't transcribe your voice message just now; please try again, or type it."
            ) from exc
        if not text.strip():
            raise _Refused("⚠️ I couldn't make out any words in that voice message.")
        return text.strip()

    async def _download(self, key: ConversationKey, a: Attachment, limit: int, what: str) -> bytes:
        channel = self.channels.get(key.channel)
        try:
            if channel is None:
                raise RuntimeError(f"channel {key.channel} is not running")
            async with asyncio.timeout(DOWNLOAD_TIMEOUT_S):
                data = await channel.download(a, max_bytes=limit)
        except Exception as exc:
            log.warning("could not download %s in %s: %s", a.name, key, exc)
            raise _Refused(
                f"⚠️ I couldn't fetch {a.name} (it may be too large, over {what}, or gone). "
                "Please send it again."
            ) from exc
        if len(data) > limit:
            raise _Refused(_too_large(a.name, len(data), what))
        return data


def sniff_image(data: bytes) -> str | None:
    """The MIME type of a picture models read, from its first bytes (None: not one of them)."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def _too_large(name: str, size: int, limit: str, _: Callable[[str], str] = str) -> str:
    too_large = _("⚠️ {name} is too large for me ({size}; the limit is {limit}).")
    return too_large.format(name=name, size=human_size(size), limit=limit)


def _too_many(count: int, limit: int, _: Callable[[str], str] = str) -> str:
    too_many = _("⚠️ That's {count} pictures at once; I can look at {limit} per message.")
    return too_many.format(count=count, limit=limit)


def _duration(seconds: float) -> str:
    s = round(seconds)
    return f"{s // 60}:{s % 60:02d} min" if s >= 60 else f"{s} s"


def _heard(transcript: str) -> str:
    shown = transcript if len(transcript) <= TRANSCRIPT_SHOWN else transcript[:TRANSCRIPT_SHOWN]
    return f"🎤 “{shown}{'…' if len(shown) < len(transcript) else ''}”"
