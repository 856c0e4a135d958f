"""A terminal channel for `relaybot chat`: one line in, the answer out, then the next line.

Confirmations are a yes/no question answered by the next line. It exits cleanly at the end of
its input, so it can be scripted: `printf 'hello\\n' | relaybot chat`.
"""

from __future__ import annotations

import asyncio
import getpass
import itertools
import sys
import time
from collections.abc import Awaitable, Callable
from typing import TextIO

from engine._channel import (
    Capabilities,
    Channel,
    Choice,
    ConfirmationPrompt,
    Engine,
    InboundMessage,
    MessageRef,
    Press,
)

WaitIdle = Callable[[str, str], Awaitable[None]]
CHAT_ID = "local"


class ConsoleChannel(Channel):
    name = "console"
    capabilities = Capabilities(
        max_message_length=100_000, buttons=False, edits=False, markdown="plain"
    )

    def __init__(
        self,
        wait_idle: WaitIdle,
        *,
        stdin: TextIO | None = None,
        stdout: TextIO | None = None,
        user_id: str | None = None,
    ) -> None:
        self._wait_idle = wait_idle
        self._in = stdin or sys.stdin
        self._out = stdout or sys.stdout
        self.user_id = user_id or getpass.getuser()
        self._ids = itertools.count(1)
        self._run_id = time.time_ns()  # message ids stay unique across runs of the same store
        self._pending: ConfirmationPrompt | None = None
        self._interactive = self._in.isatty()
        self.finished = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self, engine: Engine) -> None:
        self._task = asyncio.create_task(self._read(engine), name="console-input")

    async def stop(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()

    async def _readline(self) -> str:
        if self._interactive:
            self._write("you> ", end="")
        return await asyncio.to_thread(self._in.readline)

    async def _read(self, engine: Engine) -> None:
        try:
            while line := await self._readline():
                text = line.strip()
                if not text:
                    continue
                prompt, self._pending = self._pending, None
                if prompt is not None and text.lower() in ("y", "yes", "n", "no"):
                    choice = Choice.ONCE if text.lower().startswith("y") else Choice.CANCEL
                    press = Press(self.name, CHAT_ID, self.user_id, prompt.id, choice)
                    decision = await engine.handle_press(press)
                    if not decision.accepted:
                        self._write(decision.message)
                else:
                    msg = InboundMessage(
                        channel=self.name,
                        chat_id=CHAT_ID,
                        user_id=self.user_id,
                        user_name=self.user_id,
                        text=text,
                        message_id=f"{self._run_id}-{next(self._ids)}",
                    )
                    await engine.handle_inbound(msg)
                await self._wait_idle(self.name, CHAT_ID)
        finally:
            self.finished.set()

    def _write(self, text: str, end: str = "\n") -> None:
        self._out.write(text + end)
        self._out.flush()

    async def send(
        self, chat_id: str, text: str, *, reply_to: str | None = None, formatted: bool = True
    ) -> MessageRef:
        self._write(text)
        return MessageRef(chat_id, str(next(self._ids)))

    async def edit(self, ref: MessageRef, text: str, *, formatted: bool = True) -> None:
        if formatted:  # only the final text of a streamed reply is printed
            self._write(text)

    async def typing(self, chat_id: str) -> None:
        return None

    async def show_confirmation(self, prompt: ConfirmationPrompt) -> MessageRef:
        self._pending = prompt
        self._write(f"Confirm: {prompt.summary} [y/n]")
        return MessageRef(prompt.chat_id, str(next(self._ids)))

    async def resolve_confirmation(self, ref: MessageRef, text: str) -> None:
        self._write(text)
