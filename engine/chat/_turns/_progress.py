"""What a turn is doing while it runs tools: one status message, a short line per step.

"🔎 web_search: relaybot release notes", "⏳ slow_report · 40% loading": the line of each tool
call as it starts (``[engine] tool_progress``), with how far it has got when the tool says so
(ToolContext.progress). The message appears once a step has run for
:attr:`Progress.show_after_s` (a quick tool shows nothing), is edited in place as steps are
added or move on, at most once per the platform's ``edit_interval_s`` and never with two
requests in flight, and is deleted once the turn is over (the answer is its own message, so it
is the answer that notifies). The loop only calls :meth:`Progress.step`, which never waits for
the platform: the answer is never held up by the status line. It is not stored: a crash
mid-turn may leave one behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from engine._channel import Channel, MessageRef, Untrusted
from engine._clock import monotonic

log = logging.getLogger(__name__)
_QUIET = Untrusted()  # a step's line may show a URL carrying data: never previewed nor linked

MAX_LINES = 8  # the newest steps shown
MAX_DETAIL = 60  # characters of a step's argument
_ICONS = {"web_search": "🔎", "fetch_url": "🌐", "remind_me": "⏰", "schedule_task": "📅"}
_CLOSE_S = 10.0  # how long closing waits for a request in flight


def step_line(tool: str, args: dict[str, Any], described: str | None = None) -> str:
    """A step's line: an icon, then the tool's own words for it (`described`), or the tool and
    its first text argument, shortened."""
    icon = _ICONS.get(tool, "⏳")
    if described and described.strip():
        return f"{icon} {_short(described, 2 * MAX_DETAIL)}"
    detail = _short(next((v for v in args.values() if isinstance(v, str) and v.strip()), ""))
    return f"{icon} {tool}: {detail}" if detail else f"{icon} {tool}"


def _short(text: str, limit: int = MAX_DETAIL) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


class Progress:
    """The status message of one turn in one chat."""

    show_after_s = 1.0  # a step done sooner shows nothing

    def __init__(self, channel: Channel, chat_id: str, reply_to: str | None) -> None:
        self.channel = channel
        self.chat_id = chat_id
        self.reply_to = reply_to
        self.interval = channel.capabilities.edit_interval_s
        self.lines: list[str] = []
        self.ref: MessageRef | None = None
        self._shown = ""
        self._last = 0.0
        self._push: asyncio.Task[None] | None = None
        self._sending = False
        self._closed = False

    def step(
        self, tool: str, args: dict[str, Any], described: str | None = None
    ) -> Callable[[str], None]:
        """A tool call starts: add its line (shown soon; never waits). What it returns puts how
        far the call has got after the line ("⏳ report · 40% loading"), in place of the last."""
        if self._closed:
            return lambda text: None
        line, at = step_line(tool, args, described), len(self.lines)
        self.lines.append(line)
        self._schedule()

        def progress(text: str) -> None:
            if not self._closed and text.strip():
                self.lines[at] = f"{line} · {_short(text)}"
                self._schedule()

        return progress

    def text(self) -> str:
        shown = self.lines[-MAX_LINES:]
        return "\n".join(["…", *shown] if len(self.lines) > MAX_LINES else shown)

    def _schedule(self) -> None:
        if self._push is not None or self._closed:
            return
        if self.ref is None:
            delay = self.show_after_s
        else:
            delay = max(0.0, self.interval - (monotonic() - self._last))
        self._push = asyncio.create_task(self._flush(delay), name=f"progress-{self.chat_id}")

    async def _flush(self, delay: float) -> None:
        await asyncio.sleep(delay)  # a timer: the first showing, then the platform's edit rate
        text = self.text()
        self._sending = True
        try:
            if self.ref is None:
                self.ref = await self.channel.send(
                    self.chat_id, text, reply_to=self.reply_to, formatted=False, untrusted=_QUIET
                )
            elif text != self._shown:
                await self.channel.edit(self.ref, text, formatted=False, untrusted=_QUIET)
            self._shown = text
        except Exception as exc:
            log.warning("could not show the turn's progress in %s: %s", self.chat_id, exc)
        finally:
            self._sending = False
            self._last = monotonic()
            self._push = None
        if self.text() != self._shown:
            self._schedule()

    async def close(self) -> None:
        """The turn is over: nothing more is shown, and the status message goes."""
        self._closed = True
        push = self._push
        if push is not None:
            if self._sending:  # a request in flight: let it land, so its message can go
                await asyncio.wait({push}, timeout=_CLOSE_S)
            push.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await push
        if self.ref is not None:
            try:
                await self.channel.delete(self.ref)
            except Exception as exc:
                log.warning("could not remove the progress message in %s: %s", self.chat_id, exc)
