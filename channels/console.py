# Left whole: one small channel whole: the terminal's loop, its commands and its prompts.
"""A terminal channel for `relaybot chat`: one line in, the answer out, then the next line.

Lines starting with a command (/help, /reset, /stop, /start) go to the engine's
`handle_command`, as a chat platform's commands do; everything else is a message. A
confirmation shows the whole action under its summary (channels/_prompt.py) and is a typed
yes/no question: y, yes, n or no answer it, /stop stops the turn, anything else repeats it.
It exits cleanly at the end of its input, so it can be scripted: `printf 'hello\\n' |
relaybot chat`. A file a tool sends is saved (in `files_dir`, by default a new folder in the
temporary directory) and its path is printed.

Lines are read in a daemon thread, one at a time, so a blocked read never keeps the process
alive: Ctrl-C and Ctrl-D leave at once. On a terminal the next line is read while the bot works
on a message too: /stop stops the turn at once, and the answer to a tool's question (an MCP
server's form) is taken at once; any other line waits until the turn has ended, as it would
have been read then. Bytes that are not UTF-8 are read as U+FFFD, never as the
end of input. On a terminal the standard library's readline gives line editing and history
(input() uses it once it is imported), and the terminal's settings are put back on the way out,
even when a read is still pending.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import itertools
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from channels._links import defanged, unlinked
from channels._prompt import as_plain_text
from channels._saved import save_file
from channels._typed import ANSWERS, unknown_command
from engine import (
    Action,
    Button,
    Capabilities,
    Channel,
    Choice,
    Command,
    ConfirmationPrompt,
    Engine,
    InboundMessage,
    MessageRef,
    OutgoingFile,
    Press,
    Reply,
    Untrusted,
)

WaitIdle = Callable[[str, str], Awaitable[None]]
CHAT_ID = "local"
PROMPT = "you> "
QUESTION = "Allow it? [y/n] "


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
        files_dir: Path | None = None,
    ) -> None:
        self._wait_idle = wait_idle
        self.files_dir = files_dir
        self._in = stdin or sys.stdin
        self._out = stdout or sys.stdout
        self.user_id = user_id or getpass.getuser()
        self._ids = itertools.count(1)
        self._run_id = time.time_ns()  # message ids stay unique across runs of the same store
        self._shown: dict[str, ConfirmationPrompt] = {}  # prompt message id → prompt
        self._answered: set[str] = set()  # prompts just answered: their "running" line is noise
        self._menu: tuple[Button, ...] = ()  # the buttons of the last command reply
        self._interactive = self._in is sys.stdin and _isatty(self._in) and _isatty(self._out)
        self._reading: str | None = None  # the prompt of the read in progress
        self._next: asyncio.Future[str | None] | None = None  # a line read, or being read
        self._terminal: Any = None  # termios settings to restore
        self.finished = asyncio.Event()
        self._engine: Engine | None = None
        self._task: asyncio.Task[None] | None = None
        with contextlib.suppress(AttributeError, ValueError, OSError):  # invalid UTF-8: U+FFFD
            self._in.reconfigure(errors="replace")  # type: ignore[union-attr]

    async def start(self, engine: Engine) -> None:
        self._engine = engine
        if self._interactive:
            import readline  # noqa: F401  (input() edits lines and keeps history once imported)
            import termios

            with contextlib.suppress(termios.error):
                self._terminal = termios.tcgetattr(self._in.fileno())
        self._task = asyncio.create_task(self._read(engine), name="console-input")

    async def stop(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
        self._restore_terminal()

    async def interrupt(self) -> None:
        """Ctrl-C: stop what the bot is doing and leave."""
        if self._engine is not None:
            await self._engine.handle_command(self._message("/stop"), Command.STOP)
        if self._reading is not None and self._interactive:
            self._out.write("\n")
        await self.stop()

    def _restore_terminal(self) -> None:
        if self._terminal is not None:
            import termios

            with contextlib.suppress(termios.error):
                termios.tcsetattr(self._in.fileno(), termios.TCSADRAIN, self._terminal)

    def _read_soon(self, prompt: str) -> asyncio.Future[str | None]:
        """The next line, read in a thread; a line read (or being read) before is that line."""
        if self._next is not None:
            return self._next
        done = self._next = asyncio.get_running_loop().create_future()

        def deliver(line: str | None) -> None:
            self._reading = None
            if not done.done():
                done.set_result(line)

        def read() -> None:
            try:
                if self._interactive:
                    line: str | None = input(prompt)
                else:
                    raw = self._in.readline()
                    line = raw.rstrip("\r\n") if raw else None
            except (EOFError, OSError, ValueError):
                line = None
            with contextlib.suppress(RuntimeError):  # the loop is gone: we are exiting
                done.get_loop().call_soon_threadsafe(deliver, line)

        self._reading = prompt
        threading.Thread(target=read, name="console-input", daemon=True).start()
        return done

    def _prompt(self, prompt: str) -> None:
        """On a terminal, show `prompt` for the read begun without one while the bot worked."""
        if self._interactive and self._reading == "" and prompt:
            self._reading = prompt
            print(prompt, end="", file=self._out, flush=True)

    async def _readline(self, prompt: str) -> str | None:
        """The next line without its newline; None at the end of the input."""
        self._prompt(prompt)
        line = await asyncio.shield(self._read_soon(prompt))
        self._next = None
        if line is None and self._interactive:  # Ctrl-D: the shell's prompt on a line of its own
            self._write("")
        return line

    async def _read(self, engine: Engine) -> None:
        try:
            while (line := await self._readline(PROMPT)) is not None:
                text = line.strip()
                if not text:
                    continue
                command = Command.typed(text)
                if command is not None:
                    self._show(await engine.handle_command(self._message(text), command))
                    continue
                if text.isdigit() and 0 < int(text) <= len(self._menu):
                    action = Action(
                        self.name, CHAT_ID, self.user_id, self._menu[int(text) - 1].action, True
                    )
                    self._show(await engine.handle_action(action))
                    continue
                if unknown := unknown_command(text):
                    self._write(unknown)
                    continue
                await engine.handle_inbound(self._message(text))
                await self._settle(engine)
        finally:
            self._restore_terminal()
            self.finished.set()

    async def _until_idle(self, engine: Engine) -> None:
        """Wait until the engine is idle, reading meanwhile: an answer to a tool's question is
        taken at once, and on a terminal /stop is acted on at once; any other line is left for
        when the turn has ended (a script's /stop comes after the answer before it)."""
        idle = asyncio.ensure_future(self._wait_idle(self.name, CHAT_ID))
        while not idle.done():
            line = self._read_soon("")
            await asyncio.wait([idle, line], return_when=asyncio.FIRST_COMPLETED)  # type: ignore[type-var]
            text = (line.result() or "").strip() if line.done() else ""
            command = Command.typed(text)
            answers = not idle.done() and text and command is None  # a tool's question, maybe
            if answers and await engine.handle_answer(self._message(text)):
                self._next = None
                continue
            if idle.done() or not self._interactive or command is not Command.STOP:
                await idle
                return
            self._next = None
            self._show(await engine.handle_command(self._message(text), Command.STOP))
        await idle

    async def _settle(self, engine: Engine) -> None:
        """Wait until the engine is idle, asking each confirmation question it leaves open."""
        while True:
            await self._until_idle(engine)
            pending = [(ref, p) for ref, p in self._shown.items() if ref not in self._answered]
            if not pending:
                return
            ref, prompt = pending[-1]
            answer = await self._ask(engine)
            if answer is None:  # end of input: left pending, it expires on its own
                return
            if isinstance(answer, Command):  # /stop, /reset: the engine cancels the question
                self._show(await engine.handle_command(self._message(f"/{answer}"), answer))
                self._shown.pop(ref, None)
                continue
            decision = await engine.handle_press(
                Press(self.name, CHAT_ID, self.user_id, prompt.id, answer)
            )
            if decision.accepted:
                self._answered.add(ref)
            else:
                self._shown.pop(ref, None)
                self._write(decision.message)

    async def _ask(self, engine: Engine) -> Choice | Command | None:
        """The answer to the open question: a choice, /stop or /reset (the engine cancels the
        question; /stop stops its turn), or None at the end of input; /help and /start are
        answered and the question asked again."""
        while (line := await self._readline(QUESTION if self._interactive else "")) is not None:
            answer = line.strip().lower()
            command = Command.typed(answer)
            if answer in ANSWERS:
                return ANSWERS[answer]
            if command in (Command.STOP, Command.RESET):
                return command
            if command is not None:
                self._show(await engine.handle_command(self._message(answer), command))
            again = "" if self._interactive else f" {QUESTION.rstrip()}"  # else: the prompt
            self._write(f"Please answer y (yes) or n (no).{again}")
        return None

    def _show(self, reply: Reply) -> None:
        """A command's reply; its buttons become numbered choices the next line can pick."""
        self._menu = reply.buttons
        lines = [reply.text] if reply.text else []
        lines += [f"  [{i}] {b.label}" for i, b in enumerate(reply.buttons, 1)]
        if reply.buttons:
            lines.append("Type a number to choose.")
        if lines:
            self._write("\n".join(lines))

    def _message(self, text: str) -> InboundMessage:
        return InboundMessage(
            channel=self.name,
            chat_id=CHAT_ID,
            user_id=self.user_id,
            user_name=self.user_id,
            text=text,
            message_id=f"{self._run_id}-{next(self._ids)}",
        )

    def _write(self, text: str) -> None:
        if self._reading is not None and self._interactive:  # e.g. a reminder, at the prompt
            import readline

            self._out.write(f"\r\033[K{text}\n{self._reading}{readline.get_line_buffer()}")
        else:
            self._out.write(text + "\n")
        self._out.flush()

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
        self._write(text if untrusted is None else unlinked(text, untrusted, defanged))
        return MessageRef(chat_id, str(next(self._ids)))

    async def send_thoughts(
        self, chat_id: str, thoughts: str, *, reply_to: str | None = None
    ) -> MessageRef:
        """Dimmed on a terminal, so the answer after it stands out."""
        self._write(f"\033[2m💭 {thoughts}\033[0m" if self._interactive else f"💭 {thoughts}")
        return MessageRef(chat_id, str(next(self._ids)))

    async def edit(self, ref: MessageRef, text: str, **how: Any) -> None:
        if how.get("formatted", True):  # no edits here: a final text is printed, as a send
            await self.send(ref.chat_id, text, **how)

    async def typing(self, chat_id: str) -> None:
        return None

    async def show_confirmation(self, prompt: ConfirmationPrompt) -> MessageRef:
        ref = MessageRef(prompt.chat_id, str(next(self._ids)))
        self._shown[ref.message_id] = prompt
        self._write(as_plain_text(prompt))  # the summary, then the whole action
        if not self._interactive:
            self._write(QUESTION.rstrip())
        else:
            self._prompt(QUESTION)  # the line read while the bot worked answers it
        return ref

    async def resolve_confirmation(self, ref: MessageRef, text: str) -> None:
        self._shown.pop(ref.message_id, None)
        if ref.message_id in self._answered:  # the user's own answer, just typed: not repeated
            self._answered.discard(ref.message_id)
            return
        self._write(text)

    async def send_files(
        self, chat_id: str, files: Sequence[OutgoingFile], *, reply_to: str | None = None
    ) -> MessageRef:
        for f in files:
            if self.files_dir is None:
                self.files_dir = Path(tempfile.mkdtemp(prefix="relaybot-files-"))
            path = await asyncio.to_thread(save_file, self.files_dir, f)
            self._write(f"📎 {f.name} saved to {path}")
        return MessageRef(chat_id, str(next(self._ids)))


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
