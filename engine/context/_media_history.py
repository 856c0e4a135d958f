"""Pictures in a conversation's history: the bytes for the recent turns, a marker for the rest.

The store keeps a picture's platform reference, never its bytes. Before a turn,
:meth:`RecentImages.for_turn` gives the pictures of the last few turns their bytes again, from
a small in-memory cache (the intake fills it when it fetches a picture) or, after a restart or
an eviction, from the platform. Older pictures are sent as a short text marker
("[image: chart.png, 1.2 MB]"), so a long conversation stays cheap and within the context budget;
so is every picture when the model cannot see, or when one cannot be fetched any more.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence

from engine._channel import Attachment, Channel, MediaKind
from engine.models import Image, Message, Part, Role, Text

log = logging.getLogger(__name__)

RECENT_TURNS = 3  # the turns whose pictures are sent as pictures
CACHE_BYTES = 64 * 1024 * 1024
DOWNLOAD_TIMEOUT_S = 30.0  # per file fetched from a chat platform


def human_size(size: int | None) -> str:
    if size is None:
        return "size unknown"
    if size >= 1024 * 1024:
        return f"{size / (1024 * 1024):.1f} MB"
    return f"{max(1, round(size / 1024))} kB"


def marker(image: Image) -> str:
    return f"[image: {image.name or 'picture'}, {human_size(image.size)}]"


class ImageCache:
    """Picture bytes by platform reference, least recently used dropped past `limit` bytes."""

    def __init__(self, limit: int = CACHE_BYTES) -> None:
        self.limit = limit
        self._items: collections.OrderedDict[tuple[str, str], bytes] = collections.OrderedDict()
        self._size = 0

    def get(self, channel: str, ref: str) -> bytes | None:
        data = self._items.get((channel, ref))
        if data is not None:
            self._items.move_to_end((channel, ref))
        return data

    def put(self, channel: str, ref: str, data: bytes) -> None:
        old = self._items.pop((channel, ref), None)
        self._size -= len(old) if old is not None else 0
        self._items[(channel, ref)] = data
        self._size += len(data)
        while self._size > self.limit and len(self._items) > 1:
            _, dropped = self._items.popitem(last=False)
            self._size -= len(dropped)


class RecentImages:
    """What a turn's history sends of its pictures (see the module docstring)."""

    def __init__(
        self,
        channels: Mapping[str, Channel],
        cache: ImageCache,
        *,
        vision: Callable[[], bool],
        max_bytes: Callable[[], int],
        turns: int = RECENT_TURNS,
    ) -> None:
        self.channels = channels
        self.cache = cache
        self.vision = vision  # `[llm] vision` and `[media] max_image_mb` in force, read per
        self.max_bytes = max_bytes  # turn (a reload changes them)
        self.turns = turns

    async def for_turn(self, channel: str, history: Sequence[Message]) -> list[Message]:
        """`history` with each stored picture given its bytes, or replaced by its marker."""
        if not any(m.images for m in history):
            return list(history)
        recent = _recent_start(history, self.turns) if self.vision() else len(history)
        out = []
        for i, msg in enumerate(history):
            if msg.role is not Role.USER or not msg.images:
                out.append(msg)
                continue
            parts: list[Part] = []
            for part in msg.parts:
                if isinstance(part, Image) and part.data is None and part.ref is not None:
                    data = await self._bytes(channel, part) if i >= recent else None
                    part = dataclasses.replace(part, data=data) if data else Text(marker(part))
                parts.append(part)
            out.append(dataclasses.replace(msg, parts=parts))
        return out

    async def _bytes(self, channel_name: str, image: Image) -> bytes | None:
        assert image.ref is not None
        data = self.cache.get(channel_name, image.ref)
        if data is not None:
            return data
        channel = self.channels.get(channel_name)
        if channel is None:
            return None
        attachment = Attachment(
            MediaKind.IMAGE, image.name, image.media_type, image.size, image.ref
        )
        try:
            async with asyncio.timeout(DOWNLOAD_TIMEOUT_S):
                data = await channel.download(attachment, max_bytes=self.max_bytes())
        except Exception as exc:  # gone, expired, too large now: the marker stands in
            log.warning("could not fetch %s again for the model: %s", image.name, exc)
            return None
        self.cache.put(channel_name, image.ref, data)
        return data


def _recent_start(history: Sequence[Message], turns: int) -> int:
    """The index of the first message of the last `turns` turns (a turn: one or more user
    messages, then what answered them)."""
    seen = 0
    for i in range(len(history) - 1, -1, -1):
        starts = history[i].role is Role.USER and (i == 0 or history[i - 1].role is not Role.USER)
        if starts:
            seen += 1
            if seen == turns:
                return i
    return 0
