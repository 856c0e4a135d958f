"""`relaybot chat` on a real terminal (a pseudo-terminal): line editing, history, the yes/no
question, Ctrl-D and Ctrl-C, and the terminal left as it was found."""

from __future__ import annotations

import asyncio
import os
import pty
import signal
import sys
import termios
from pathlib import Path

from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.test_cli import write_config

UP, LEFT, CTRL_D = b"\x1b[A", b"\x1b[D", b"\x04"


class Terminal:
    """The user's side of a pseudo-terminal: type keys, wait for text on the screen."""

    def __init__(self) -> None:
        self.fd, self.child = pty.openpty()
        os.set_blocking(self.fd, False)
        self.screen = b""
        self._seen = 0
        self._more = asyncio.Event()
        asyncio.get_running_loop().add_reader(self.fd, self._read)

    def _read(self) -> None:
        try:
            self.screen += os.read(self.fd, 65536)
        except OSError:  # the child side closed
            asyncio.get_running_loop().remove_reader(self.fd)
        self._more.set()

    async def expect(self, what: bytes, timeout: float = 30) -> None:
        """Wait until `what` appears after the last thing expected."""
        async with asyncio.timeout(timeout):
            while (at := self.screen.find(what, self._seen)) < 0:
                self._more.clear()
                await self._more.wait()
        self._seen = at + len(what)

    def type(self, keys: bytes) -> None:
        os.write(self.fd, keys)

    def close(self) -> None:
        asyncio.get_running_loop().remove_reader(self.fd)
        os.close(self.fd)
        os.close(self.child)


async def test_chat_on_a_terminal(tmp_path: Path, llm: FakeOpenAI) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "a.txt").write_text("x")
    cfg = write_config(tmp_path, llm, f'builtins = ["delete_file"]\nworkspace = "{workspace}"')
    term = Terminal()
    before = termios.tcgetattr(term.child)
    env = {**os.environ, "TERM": "xterm", "RELAYBOT_TEST_KEY": "sk-test-key-123456"}
    command = (sys.executable, "-m", "bot", "chat", "-c", str(cfg))
    io = {"stdin": term.child, "stdout": term.child, "stderr": term.child, "env": env}
    proc = await asyncio.create_subprocess_exec(*command, **io)
    try:
        await term.expect(b"you> ")
        term.type(b"helo" + LEFT + b"l\r")  # fixed with the arrow keys before Enter
        await term.expect(b"echo: hello")
        await term.expect(b"you> ")
        term.type(UP + b"\r")  # the same line again, from the history
        await term.expect(b"echo: hello")
        assert [r["messages"][-1]["content"] for r in llm.requests] == ["hello", "hello"]

        llm.script(tool_call("delete_file", {"path": "a.txt"}), text("Gone."))
        await term.expect(b"you> ")
        term.type(b"delete a.txt\r")
        await term.expect(b"relaybot wants to: Delete the workspace file a.txt")
        await term.expect(b"Allow it? [y/n] ")
        term.type(b"sure\r")
        await term.expect(b"Please answer y (yes) or n (no).")
        await term.expect(b"Allow it? [y/n] ")
        term.type(b"yes\r")
        await term.expect(b"Gone.")
        assert not (workspace / "a.txt").exists()

        await term.expect(b"you> ")
        term.type(CTRL_D)
        assert await asyncio.wait_for(proc.wait(), 15) == 0
        assert termios.tcgetattr(term.child) == before  # echo and line mode are back

        # Ctrl-C while the line is being read: it leaves at once, the terminal restored.
        proc = await asyncio.create_subprocess_exec(*command, **io)
        await term.expect(b"you> ")
        term.type(b"half a mess")
        await term.expect(b"half a mess")
        proc.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(proc.wait(), 15) == 0
        assert termios.tcgetattr(term.child) == before
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        term.close()
