"""Small files for media tests: a real PNG of any size, bytes that start as a JPEG does, a voice
note's worth of bytes. Each carries a tag, so a test can tell which file reached the model."""

from __future__ import annotations

import struct
import zlib


def png(tag: str = "", *, width: int = 2, height: int = 2, padding: int = 0) -> bytes:
    """A valid PNG; `padding` bytes of an ancillary chunk make it as large as a test needs."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    rows = b"".join(b"\0" + b"\x80\x40\x20" * width for _ in range(height))
    extra = chunk(b"tEXt", b"tag\0" + tag.encode() + b"\0" * padding)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + extra
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def jpeg(tag: str = "", size: int = 64) -> bytes:
    """Bytes that begin as a JPEG does (models are not asked to decode them here)."""
    head = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + tag.encode()
    return head + b"\0" * max(0, size - len(head))


def voice(tag: str = "", size: int = 4096) -> bytes:
    """An Ogg/Opus voice note's first bytes, padded."""
    head = b"OggS\x00\x02" + tag.encode()
    return head + b"\0" * max(0, size - len(head))
