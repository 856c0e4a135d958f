"""What the bot shows in a chat, part by part, so a long or growing text is kept up to date.

A text longer than one message goes out as several parts. The engine keeps only the reference of
the last part it was given, and later edits that reference with the whole new text (streaming,
then the formatted final answer). :class:`ShownMessages` remembers, per reference, which messages
show which part, so an edit

- sends only the parts whose rendering changed (a platform call per changed part, none for the
  rest),
- continues in new messages when the text outgrows what is shown,
- deletes the messages of parts that no longer exist when the text got shorter.

The platform-specific steps (render and split, send, edit, delete one part) come from a small
:class:`Surface`; a rendered part is opaque here and only compared for equality. Memory is
bounded (least recently used references are forgotten); an edit of a forgotten reference rewrites
its message and continues from there.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from engine import MessageRef, Untrusted

P = TypeVar("P")


class Surface(Protocol[P]):
    """How one platform renders text into parts and shows one part."""

    def render(self, text: str, formatted: bool, *, untrusted: Untrusted | None) -> list[P]:
        """`text` as message parts in order (Markdown when `formatted`); never empty. With
        `untrusted`, parts without link previews and without links it does not allow."""

    async def send_part(
        self, chat_id: str, part: P, reply_to: str | None, *, once: str | None = None
    ) -> str:
        """Send one part as a new message; returns its message id. `once` names this part's
        creation, the same when a restart sends it again (see :meth:`Channel.send`)."""

    async def edit_part(self, chat_id: str, message_id: str, part: P) -> None:
        """Make message `message_id` show `part` ("not modified" is not an error)."""

    async def delete_part(self, chat_id: str, message_id: str) -> None:
        """Delete a message that showed a part which no longer exists."""


@dataclass(slots=True)
class _Shown(Generic[P]):
    message_id: str
    part: P | None  # None: unknown (a reference we do not remember)


class ShownMessages(Generic[P]):
    """Send and edit texts on a :class:`Surface`, remembering up to `remember` references."""

    def __init__(self, surface: Surface[P], remember: int) -> None:
        self._surface = surface
        self._remember = remember
        self._shown: OrderedDict[tuple[str, str], list[_Shown[P]]] = OrderedDict()

    async def send(
        self,
        chat_id: str,
        text: str,
        *,
        reply_to: str | None,
        formatted: bool,
        once: str | None = None,
        untrusted: Untrusted | None = None,
    ) -> MessageRef:
        """Send every part in order (the first replies to `reply_to`); returns the reference of
        the last part, which a later :meth:`edit` rewrites as a whole. With `once`, each part's
        creation is named after it and its place (``once:0``, ``once:1``, …)."""
        shown: list[_Shown[P]] = []
        for i, part in enumerate(self._surface.render(text, formatted, untrusted=untrusted)):
            message_id = await self._surface.send_part(
                chat_id,
                part,
                reply_to if i == 0 else None,
                once=None if once is None else f"{once}:{i}",
            )
            shown.append(_Shown(message_id, part))
        ref = MessageRef(chat_id, shown[-1].message_id)
        self._keep(ref, shown)
        return ref

    async def edit(
        self, ref: MessageRef, text: str, *, formatted: bool, untrusted: Untrusted | None = None
    ) -> None:
        """Show `text` in the messages of `ref`: changed parts edited, new ones sent, stale ones
        deleted. What was done is remembered even when a step fails."""
        key = (ref.chat_id, ref.message_id)
        shown = self._shown.pop(key, None) or [_Shown[P](ref.message_id, None)]
        parts = self._surface.render(text, formatted, untrusted=untrusted)
        surface = self._surface
        try:
            for i, part in enumerate(parts):
                if i == len(shown):
                    message_id = await surface.send_part(ref.chat_id, part, None)
                    shown.append(_Shown(message_id, part))
                elif shown[i].part != part:
                    await surface.edit_part(ref.chat_id, shown[i].message_id, part)
                    shown[i].part = part
            while len(shown) > len(parts):
                await surface.delete_part(ref.chat_id, shown[-1].message_id)
                shown.pop()
        finally:
            self._keep(ref, shown)

    def _keep(self, ref: MessageRef, shown: list[_Shown[P]]) -> None:
        key = (ref.chat_id, ref.message_id)
        self._shown[key] = shown
        self._shown.move_to_end(key)
        while len(self._shown) > self._remember:
            self._shown.popitem(last=False)
