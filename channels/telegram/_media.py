"""Files in Telegram messages, as the engine sees them, and fetching them with PTB's file API.

What a message carries becomes an :class:`Attachment` whose reference is Telegram's file_id;
the engine decides what it accepts. A photo comes in several sizes: its reference lists them all
(largest first, each with its size), so :func:`download` takes the largest one under the limit
the engine gives, and the size the engine judges at the door is that of the smallest. Downloads
go through ``Bot.get_file`` (whose answer says the size, checked before the body is read) and
``File.download_to_memory``; the Bot API serves files up to 20 MB.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from datetime import timedelta

from telegram import Bot, Message, PhotoSize
from telegram.error import TelegramError
from telegram.ext import filters

from engine import Attachment, MediaKind
from tools.errors import DownloadError

# The messages that carry a file (a location, contact or poll carries none).
MEDIA = (
    filters.PHOTO
    | filters.Document.ALL
    | filters.Sticker.ALL
    | filters.VOICE
    | filters.AUDIO
    | filters.VIDEO
    | filters.ANIMATION
    | filters.VIDEO_NOTE
)


def attachments_of(message: Message) -> tuple[Attachment, ...]:
    """What `message` carries (a Telegram message carries one file at most)."""
    if message.photo:
        return (_photo(message.photo),)
    if (sticker := message.sticker) is not None:
        if sticker.is_animated or sticker.is_video:
            mime = "video/webm" if sticker.is_video else "application/x-tgsticker"
            return (
                Attachment(MediaKind.FILE, "sticker", mime, sticker.file_size, sticker.file_id),
            )
        name = "sticker.webp"
        return (
            Attachment(MediaKind.IMAGE, name, "image/webp", sticker.file_size, sticker.file_id),
        )
    if (voice := message.voice) is not None:
        mime = voice.mime_type or "audio/ogg"
        return (
            Attachment(
                MediaKind.AUDIO,
                "voice.ogg",
                mime,
                voice.file_size,
                voice.file_id,
                _s(voice.duration),
            ),
        )
    if (audio := message.audio) is not None:
        name, mime = audio.file_name or "audio.mp3", audio.mime_type or "audio/mpeg"
        return (
            Attachment(
                MediaKind.AUDIO, name, mime, audio.file_size, audio.file_id, _s(audio.duration)
            ),
        )
    if (document := message.document) is not None:
        mime = document.mime_type or ""
        kind = MediaKind.IMAGE if mime.startswith("image/") else MediaKind.FILE
        name = document.file_name or "file"
        return (Attachment(kind, name, mime, document.file_size, document.file_id),)
    for video in (message.video, message.animation, message.video_note):
        if video is not None:
            name = getattr(video, "file_name", None) or "video.mp4"
            mime = getattr(video, "mime_type", None) or "video/mp4"
            return (Attachment(MediaKind.FILE, name, mime, video.file_size, video.file_id),)
    return ()


def _photo(sizes: Sequence[PhotoSize]) -> Attachment:
    ordered = sorted(sizes, key=lambda p: (p.file_size or 0, p.width * p.height), reverse=True)
    ref = " ".join(f"{p.file_id}:{p.file_size or ''}" for p in ordered)
    return Attachment(MediaKind.IMAGE, "photo.jpg", "image/jpeg", ordered[-1].file_size, ref)


def _s(duration: int | timedelta) -> float:
    """PTB 22 gives seconds; a later major release gives a timedelta."""
    return duration.total_seconds() if isinstance(duration, timedelta) else float(duration)


def _choose(ref: str, max_bytes: int) -> str:
    """The file_id to fetch: the largest size of a photo under `max_bytes` (of a single file,
    its id). One whose size is not told is tried; get_file says it."""
    candidates = [entry.partition(":") for entry in ref.split(" ")]
    for file_id, _, size in candidates:
        if not size or int(size) <= max_bytes:
            return file_id
    raise DownloadError(f"every size of this picture is over {max_bytes} bytes")


async def download(bot: Bot, attachment: Attachment, max_bytes: int) -> bytes:
    file_id = _choose(attachment.ref, max_bytes)
    try:
        file = await bot.get_file(file_id)
        if file.file_size is not None and file.file_size > max_bytes:
            raise DownloadError(f"{attachment.name} is {file.file_size} bytes, over {max_bytes}")
        out = io.BytesIO()
        await file.download_to_memory(out)
    except TelegramError as exc:  # "file is too big" (over 20 MB), gone, unreachable
        raise DownloadError(f"Telegram did not give {attachment.name}: {exc}") from exc
    return out.getvalue()
