"""A Channel for engine tests: a platform that records what the bot shows, with events to wait on.

It implements the real channels.Channel interface (like the fake servers stand in for Telegram
and Discord), so the dispatcher under test is the real one. Files the bot sends are recorded as
"file" items (`files` keeps their content); files users send are put in `uploads` by reference
(`upload(...)` makes the Attachment), and `downloads` counts each fetch.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from engine import (
    Attachment,
    Button,
    Capabilities,
    Channel,
    ConfirmationPrompt,
    Engine,
    InboundMessage,
    MediaKind,
    MessageRef,
    OutgoingFile,
    Reply,
    Untrusted,
)
from tools.errors import DownloadError

_message_ids = itertools.count(1)  # unique across channels, like a platform's ids


@dataclass
class Shown:
    kind: str  # "send", "edit", "confirm", "resolve", "typing", "file", "thoughts"
    chat_id: str
    text: str
    ref: str = ""
    reply_to: str | None = None
    prompt: ConfirmationPrompt | None = None
    file: OutgoingFile | None = None
    buttons: tuple[Button, ...] = ()  # a private message's ("private": to a user by their id)
    untrusted: Untrusted | None = None  # how an answer after untrusted content is to be shown


@dataclass
class RecordingChannel(Channel):
    name: str = "test"
    capabilities: Capabilities = field(
        default_factory=lambda: Capabilities(
            max_message_length=4096,
            buttons=True,
            edits=True,
            markdown="plain",
            edit_interval_s=0.05,
            typing_interval_s=30,
        )
    )
    log: list[Shown] = field(default_factory=list)
    engine: Engine | None = None
    uploads: dict[str, bytes] = field(default_factory=dict)  # what users sent, by reference
    downloads: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self._ids = itertools.count(1)
        self._changed = asyncio.Condition()

    async def _record(self, item: Shown) -> None:
        self.log.append(item)
        async with self._changed:
            self._changed.notify_all()

    async def wait_for(
        self, kind: str, count: int = 1, *, chat_id: str | None = None, timeout: float = 5.0
    ) -> list[Shown]:
        """Wait until `count` items of `kind` (optionally in one chat) have been shown."""

        def matching() -> list[Shown]:
            return [s for s in self.log if s.kind == kind and chat_id in (None, s.chat_id)]

        async with asyncio.timeout(timeout):
            async with self._changed:
                await self._changed.wait_for(lambda: len(matching()) >= count)
        return matching()

    def texts(self, kind: str = "send", chat_id: str | None = None) -> list[str]:
        return [s.text for s in self.log if s.kind == kind and chat_id in (None, s.chat_id)]

    def message(
        self,
        text: str,
        *,
        chat_id: str = "c1",
        user_id: str = "u1",
        message_id: str | None = None,
        is_private: bool = True,
        attachments: Sequence[Attachment] = (),
        group_id: str | None = None,
    ) -> InboundMessage:
        return InboundMessage(
            channel=self.name,
            chat_id=chat_id,
            user_id=user_id,
            user_name=f"user-{user_id}",
            text=text,
            message_id=message_id or f"m{next(_message_ids)}",
            is_private=is_private,
            attachments=tuple(attachments),
            group_id=group_id,
        )

    def upload(
        self, kind: MediaKind, name: str, mime_type: str, data: bytes, **kw: float
    ) -> Attachment:
        """A file a user sends: stored under a new reference, described as a platform would."""
        ref = f"file-{next(self._ids)}"
        self.uploads[ref] = data
        return Attachment(kind, name, mime_type, len(data), ref, kw.get("duration_s"))

    async def start(self, engine: Engine) -> None:
        self.engine = engine

    async def stop(self) -> None:
        self.engine = None

    async def send(
        self,
        chat_id: str,
        text: str,
        *,
        reply_to: str | None = None,
        formatted: bool = True,
        once: str | None = None,
        untrusted: Untrusted | None = None,
    ) -> MessageRef:
        ref = MessageRef(chat_id, f"s{next(self._ids)}")
        shown = Shown("send", chat_id, text, ref.message_id, reply_to, untrusted=untrusted)
        await self._record(shown)
        return ref

    async def send_thoughts(
        self, chat_id: str, thoughts: str, *, reply_to: str | None = None
    ) -> MessageRef:
        ref = MessageRef(chat_id, f"s{next(self._ids)}")
        await self._record(Shown("thoughts", chat_id, thoughts, ref.message_id, reply_to))
        return ref

    async def edit(
        self,
        ref: MessageRef,
        text: str,
        *,
        formatted: bool = True,
        untrusted: Untrusted | None = None,
    ) -> None:
        kind = "edit" if formatted else "stream"
        await self._record(Shown(kind, ref.chat_id, text, ref.message_id, untrusted=untrusted))

    async def typing(self, chat_id: str) -> None:
        await self._record(Shown("typing", chat_id, ""))

    async def show_confirmation(self, prompt: ConfirmationPrompt) -> MessageRef:
        ref = MessageRef(prompt.chat_id, f"s{next(self._ids)}")
        await self._record(
            Shown(
                "confirm", prompt.chat_id, prompt.summary, ref.message_id, prompt.reply_to, prompt
            )
        )
        return ref

    async def send_private(self, user_id: str, reply: Reply) -> MessageRef:
        ref = MessageRef(user_id, f"s{next(self._ids)}")
        shown = Shown("private", user_id, reply.text, ref.message_id, buttons=reply.buttons)
        await self._record(shown)
        return ref

    async def resolve_confirmation(self, ref: MessageRef, text: str) -> None:
        await self._record(Shown("resolve", ref.chat_id, text, ref.message_id))

    async def send_files(
        self, chat_id: str, files: Sequence[OutgoingFile], *, reply_to: str | None = None
    ) -> MessageRef:
        ref = MessageRef(chat_id, "")
        for f in files:
            ref = MessageRef(chat_id, f"s{next(self._ids)}")
            await self._record(Shown("file", chat_id, f.name, ref.message_id, reply_to, file=f))
        return ref

    async def download(self, attachment: Attachment, *, max_bytes: int) -> bytes:
        self.downloads[attachment.ref] += 1
        data = self.uploads.get(attachment.ref)
        if data is None:
            raise DownloadError(f"no file {attachment.ref}")
        if len(data) > max_bytes:
            raise DownloadError(f"{attachment.name} is over {max_bytes} bytes")
        return data
