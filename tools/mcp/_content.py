"""What an MCP server returns, as a ToolResult: text for the model; pictures for the model to
look at (`ToolResult.images`, shown when it can see); content meant for the user (its
`annotations.audience` names "user") and binary resources sent to the chat as files; resource
links and embedded resources remembered as the URIs the server's `read_resource` may read.

Only what the server offered (its `resources/list`) or linked or embedded in a result can be
read back: the model cannot make a server read an arbitrary URI through relaybot.
"""

from __future__ import annotations

import base64
import binascii
import collections
import json
import mimetypes
from collections.abc import Iterable
from dataclasses import dataclass, field

import mcp.types as types

from tools._result import File, ToolResult
from tools.builtins._text import clip

MAX_RESULT_CHARS = 16_000
MAX_BINARY_BYTES = 20 * 1024 * 1024  # a picture or file a server returns (decoded)
MAX_URIS = 10_000  # the URIs a server's read_resource remembers (the oldest forgotten first)

Block = types.ContentBlock


class Offered:
    """The URIs one server offered or linked, newest last, at most `limit` of them."""

    def __init__(self, limit: int = MAX_URIS) -> None:
        self.limit = limit
        self._uris: collections.OrderedDict[str, None] = collections.OrderedDict()

    def add(self, uri: str) -> None:
        self._uris[uri] = None
        self._uris.move_to_end(uri)
        while len(self._uris) > self.limit:
            self._uris.popitem(last=False)

    def __contains__(self, uri: object) -> bool:
        return uri in self._uris

    def __len__(self) -> int:
        return len(self._uris)


@dataclass(slots=True)
class _Parts:
    """A result being put together: text for the model, pictures, files for the user."""

    reader: str  # the name of the server's read_resource tool ("" when it has none)
    texts: list[str] = field(default_factory=list)
    shown: list[str] = field(default_factory=list)  # text meant for the user alone
    images: list[File] = field(default_factory=list)
    files: list[File] = field(default_factory=list)

    def result(self, is_error: bool, structured: object = None) -> ToolResult:
        if not self.texts and not self.shown and structured is not None:
            self.texts.append(json.dumps(structured, ensure_ascii=False, default=str))
        text = clip("\n".join(self.texts), MAX_RESULT_CHARS)
        if self.shown:
            text = f"{text}\n[Shown to the user: {clip(' '.join(self.shown), 500)}]".strip()
        text = text or "(no output)"
        user = "\n".join(self.shown) if self.shown else None
        return ToolResult(
            text,
            for_user=user,
            is_error=is_error,
            files=tuple(self.files),
            images=tuple(self.images),
        )


def call_result(result: types.CallToolResult, offered: Offered, reader: str) -> ToolResult:
    """A tool call's result; the resources it links or embeds are added to `offered`."""
    parts = _Parts(reader)
    for n, block in enumerate(result.content, 1):
        _block(parts, block, n, offered)
    return parts.result(result.is_error, result.structured_content)


def read_result(
    contents: Iterable[types.TextResourceContents | types.BlobResourceContents],
) -> ToolResult:
    """What `resources/read` gave: text for the model, a binary resource to the chat."""
    parts = _Parts("")
    for n, content in enumerate(contents, 1):
        _resource(parts, content, n, for_user=False)
    return parts.result(False)


def _block(parts: _Parts, block: Block, n: int, offered: Offered) -> None:
    audience = block.annotations.audience if block.annotations else None
    for_user = audience is not None and "user" in audience
    for_model = audience is None or "assistant" in audience
    match block:
        case types.TextContent(text=text):
            if for_model:
                parts.texts.append(text)
            if for_user and not for_model:
                parts.shown.append(text)
        case types.ImageContent() | types.AudioContent():
            _media(parts, block, n, for_user=for_user, for_model=for_model)
        case types.ResourceLink(uri=uri):
            offered.add(str(uri))
            what = ", ".join(x for x in (block.name, block.mime_type) if x)
            how = f": read it with {parts.reader}" if parts.reader else ""
            parts.texts.append(f"[resource {uri} ({what}){how}]")
        case types.EmbeddedResource(resource=resource):
            offered.add(str(resource.uri))
            _resource(parts, resource, n, for_user=for_user)


def _media(
    parts: _Parts,
    block: types.ImageContent | types.AudioContent,
    n: int,
    *,
    for_user: bool,
    for_model: bool,
) -> None:
    kind = "picture" if isinstance(block, types.ImageContent) else "audio"
    data = _decoded(block.data)
    if data is None:
        parts.texts.append(f"[{kind} ({block.mime_type}) not shown: too large or not base64]")
        return
    file = File(f"{kind}-{n}{_extension(block.mime_type)}", data, mime_type=block.mime_type)
    said = f"[{kind} {file.name} ({block.mime_type}, {_size(len(data))})"
    if for_user:
        parts.files.append(file)  # the note of what was sent follows (engine/loop)
    if not for_model:
        return
    if kind == "picture":
        parts.images.append(file)
        parts.texts.append(f"{said}: shown to you when you can see pictures]")
    else:
        parts.texts.append(f"{said}: you cannot listen to it]")


def _resource(
    parts: _Parts,
    res: types.TextResourceContents | types.BlobResourceContents,
    n: int,
    *,
    for_user: bool,
) -> None:
    uri, mime = str(res.uri), res.mime_type or "application/octet-stream"
    if isinstance(res, types.TextResourceContents):
        parts.texts.append(f"[resource {uri}]\n{res.text}")
        if for_user:
            parts.files.append(File(_file_name(uri, mime, n), res.text.encode(), mime_type=mime))
        return
    data = _decoded(res.blob)
    if data is None:
        parts.texts.append(f"[resource {uri} ({mime}) not read: too large or not base64]")
        return
    file = File(_file_name(uri, mime, n), data, mime_type=mime)
    parts.files.append(file)  # binary: the user gets it as a file
    parts.texts.append(f"[resource {uri} ({mime}, {_size(len(data))}) sent as {file.name}]")
    if mime.startswith("image/"):
        parts.images.append(file)


def _decoded(data: str) -> bytes | None:
    if len(data) > MAX_BINARY_BYTES * 4 // 3 + 4:
        return None
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None


def _extension(mime: str) -> str:
    return mimetypes.guess_extension(mime) or ""


def _file_name(uri: str, mime: str, n: int) -> str:
    last = uri.rstrip("/").rsplit("/", 1)[-1]
    name = "".join(c if c.isalnum() or c in "._-" else "_" for c in last)[:80].strip("._")
    name = name or f"resource-{n}"
    return name if "." in name else name + _extension(mime)


def _size(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MB" if n >= 1024 * 1024 else f"{max(1, round(n / 1024))} kB"
