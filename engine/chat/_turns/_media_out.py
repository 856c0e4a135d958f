"""Files from tools to the user: loaded (a path is read in a worker thread), sent by the channel
natively and in order, as soon as the call that made them ends, so they come before the answer
that talks about them. The model is told what was sent, or why it was not.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from engine._channel import Channel, OutgoingFile
from engine.context import human_size
from tools import File

log = logging.getLogger(__name__)

MAX_FILE_BYTES = 50 * 1024 * 1024  # what a Telegram bot may upload


async def send_files(channel: Channel | None, chat_id: str, files: Sequence[File]) -> str:
    """Send `files` to the chat; returns a note for the model (starting with a newline)."""
    names = ", ".join(f.name for f in files)
    try:
        if channel is None:
            raise RuntimeError("the channel is not running")
        loaded = [await _load(f) for f in files]
        await channel.send_files(chat_id, loaded)
    except Exception as exc:
        log.warning("could not send %s to %s: %s", names, chat_id, exc)
        return f"\n[Could not send {names} to the user: {_reason(exc)}]"
    shown = ", ".join(f"{f.name} ({f.mime_type}, {human_size(len(f.data))})" for f in loaded)
    return f"\n[Sent to the user as files: {shown}. Do not repeat their content.]"


async def _load(file: File) -> OutgoingFile:
    data = file.data
    if data is None:
        assert file.path is not None
        data = await asyncio.to_thread(_read, file)
    if len(data) > MAX_FILE_BYTES:
        raise ValueError(f"{file.name} is {human_size(len(data))}, over the 50 MB limit")
    return OutgoingFile(file.name, file.mime_type, data)


def _read(file: File) -> bytes:
    assert file.path is not None
    size = file.path.stat().st_size
    if size > MAX_FILE_BYTES:  # not read at all
        raise ValueError(f"{file.name} is {human_size(size)}, over the 50 MB limit")
    return file.path.read_bytes()


def _reason(exc: Exception) -> str:
    if isinstance(exc, OSError):
        return exc.strerror or type(exc).__name__  # never the absolute path
    return str(exc)[:200] or type(exc).__name__
