"""Files in Discord messages, as the engine sees them, and fetching and sending them with
discord.py's own file API.

An attachment's reference is its URL. Discord says its size and type with the message, so the
size is checked before anything is fetched; :func:`download` rebuilds the
:class:`discord.Attachment` from what the inbox kept and reads it with ``Attachment.read``
(discord.py's CDN request, on the client's session), which also works after a restart. Discord
signs attachment URLs for about a day: an older message's file cannot be fetched again.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import discord

from engine import Attachment, MediaKind, OutgoingFile
from tools.errors import DownloadError

FILES_PER_MESSAGE = 10  # Discord's limit


def attachments_of(message: discord.Message) -> tuple[Attachment, ...]:
    return tuple(_attachment(a) for a in message.attachments)


def _attachment(a: discord.Attachment) -> Attachment:
    mime = (a.content_type or "").split(";")[0].strip()
    if a.is_voice_message() or mime.startswith("audio/"):
        kind = MediaKind.AUDIO
    elif mime.startswith("image/"):
        kind = MediaKind.IMAGE
    else:
        kind = MediaKind.FILE
    return Attachment(kind, a.filename, mime, a.size, a.url, a.duration)


async def download(client: discord.Client, attachment: Attachment, max_bytes: int) -> bytes:
    if attachment.size is not None and attachment.size > max_bytes:
        raise DownloadError(f"{attachment.name} is {attachment.size} bytes, over {max_bytes}")
    payload = {
        "id": 0,
        "filename": attachment.name,
        "size": attachment.size or 0,
        "url": attachment.ref,
        "proxy_url": attachment.ref,
        "content_type": attachment.mime_type,
    }
    # ConnectionState is how discord.py builds every model; only its HTTP client is used here.
    found = discord.Attachment(data=payload, state=client._connection)  # type: ignore[arg-type]
    try:
        return await found.read()
    except discord.HTTPException as exc:  # gone (404), expired or forbidden (403)
        raise DownloadError(f"Discord did not give {attachment.name}: {exc}") from exc


def batches(files: Sequence[OutgoingFile]) -> list[list[discord.File]]:
    """`files` as discord.py uploads, at most ten to a message, in order."""
    uploads = [discord.File(io.BytesIO(f.data), filename=f.name) for f in files]
    return [uploads[i : i + FILES_PER_MESSAGE] for i in range(0, len(uploads), FILES_PER_MESSAGE)]
