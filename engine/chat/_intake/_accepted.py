"""What is accepted at the door: a message judged by what the platform says about its
attachments (type, size, length, count), before anything is downloaded (:func:`refusal`, asked
by ``Dispatcher.handle_inbound``), and the words of a refusal. What each attachment becomes for
the model, once the chat's turn begins, is engine/chat/_intake/_media.py's.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from pathlib import PurePosixPath

from engine._channel import Attachment, MediaKind
from engine.chat._settings._sections import MediaSettings
from engine.context import human_size
from engine.i18n import translator

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
                return too_large(a.name, a.size, limit, _)
            images += 1
        elif use is Use.TEXT:
            if a.size is not None and a.size > settings.max_text_bytes:
                limit = _("{kb} KB per text file").format(kb=settings.max_text_kb)
                return too_large(a.name, a.size, limit, _)
        elif not transcribes:
            return _("⚠️ Voice messages are not set up here (no transcription model). Please type.")
        elif a.duration_s is not None and a.duration_s > settings.max_audio_s:
            return _(
                "⚠️ That voice message is {length} long; I can listen to {limit} at most. Please "
                "send a shorter one."
            ).format(length=_duration(a.duration_s), limit=_duration(settings.max_audio_s))
    if images > settings.max_images_per_turn:
        return too_many(images, settings.max_images_per_turn, _)
    return None


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


def too_large(name: str, size: int, limit: str, _: Callable[[str], str] = str) -> str:
    too_large = _("⚠️ {name} is too large for me ({size}; the limit is {limit}).")
    return too_large.format(name=name, size=human_size(size), limit=limit)


def too_many(count: int, limit: int, _: Callable[[str], str] = str) -> str:
    too_many = _("⚠️ That's {count} pictures at once; I can look at {limit} per message.")
    return too_many.format(count=count, limit=limit)


def _duration(seconds: float) -> str:
    s = round(seconds)
    return f"{s // 60}:{s % 60:02d} min" if s >= 60 else f"{s} s"
