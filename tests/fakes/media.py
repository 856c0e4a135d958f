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


def _ogg_crc_table() -> list[int]:
    table = []
    for i in range(256):
        r = i << 24
        for _ in range(8):
            r = ((r << 1) ^ 0x04C11DB7) if r & 0x80000000 else (r << 1)
        table.append(r & 0xFFFFFFFF)
    return table


_OGG_CRC = _ogg_crc_table()


def ogg_opus_seconds(data: bytes) -> float:
    """How long the Ogg/Opus stream `data` plays, after checking it as a player would: every
    page's capture pattern and CRC, an OpusHead and an OpusTags packet first, audio pages after.
    Raises AssertionError for anything a player would refuse."""
    pos, packets, granule, pre_skip = 0, [], 0, 0
    partial = b""
    while pos < len(data):
        assert data[pos : pos + 4] == b"OggS", f"no Ogg page at byte {pos}"
        granule = struct.unpack_from("<q", data, pos + 6)[0]
        crc = struct.unpack_from("<I", data, pos + 22)[0]
        segments = data[pos + 26]
        lacing = data[pos + 27 : pos + 27 + segments]
        end = pos + 27 + segments + sum(lacing)
        page = bytearray(data[pos:end])
        page[22:26] = b"\0\0\0\0"
        check = 0
        for byte in page:
            check = ((check << 8) ^ _OGG_CRC[((check >> 24) ^ byte) & 0xFF]) & 0xFFFFFFFF
        assert check == crc, f"bad CRC in the page at byte {pos}"
        body = pos + 27 + segments
        for size in lacing:
            partial += data[body : body + size]
            body += size
            if size < 255:
                packets.append(partial)
                partial = b""
        pos = end
    assert packets[0].startswith(b"OpusHead"), "the first packet is not an OpusHead"
    assert packets[1].startswith(b"OpusTags"), "the second packet is not OpusTags"
    assert len(packets) > 2, "no audio packets"
    pre_skip = struct.unpack_from("<H", packets[0], 10)[0]
    return (granule - pre_skip) / 48_000
