"""run_command: a shell command in the workspace, with a time limit and an output cap."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tools._base import Tier, Tool
from tools._result import ToolResult
from tools.builtins._sandbox import keeper_argv, landlock_abi, secret_paths

log = logging.getLogger(__name__)

_SAFE_ENV = ("PATH", "LANG", "LC_ALL", "TZ")


class RunCommand(Tool):
    """Runs `/bin/sh -c <command>` in the workspace under a keeper process (`_sandbox.py`).

    The command gets a minimal environment (no tokens or API keys from the daemon's) and no
    stdin. Its keeper kills everything it started, however detached, when the shell exits; a
    time limit or a cancelled call sends the keeper SIGTERM, which does the same. The command
    cannot read `hidden` paths (the systemd credentials directory is always one) nor the
    daemon's /proc entries, where the kernel has Landlock.
    """

    name = "run_command"
    tier = Tier.DESTRUCTIVE
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "command": {
                "type": "string",
                "minLength": 1,
                "description": "A /bin/sh command line, e.g. 'ls -la' or 'python3 report.py'.",
            }
        },
        "required": ["command"],
        "additionalProperties": False,
    }

    def __init__(
        self,
        root: Path,
        *,
        timeout_s: float = 60.0,
        output_max: int = 8_000,
        hidden: Iterable[Path] = (),
    ) -> None:
        self.root = root
        self.hidden = [*hidden, *map(Path, secret_paths())]
        if self.hidden and landlock_abi() < 1:
            log.warning(
                "the kernel has no Landlock (Linux >= 5.13): commands run by run_command "
                "can read %s",
                ", ".join(map(str, self.hidden)),
            )
        self.command_timeout_s = timeout_s
        self.timeout_s = timeout_s + 10  # the registry's limit; ours fires first, with output
        self.output_max = output_max
        self.description = (
            "Run a shell command in the workspace folder and get its exit code and output "
            "(stdout and stderr together, cut when long). The user approves each command "
            f"first. Use it for what the file tools cannot do; nothing interactive, at most "
            f"{timeout_s:g} s per command."
        )

    def describe_call(self, args: dict[str, Any]) -> str:
        first = args["command"].strip().split("\n")[0]
        shown = first if len(first) <= 60 and "\n" not in args["command"].strip() else "a command"
        return f"Run {shown} in the workspace"

    def describe_action(self, args: dict[str, Any]) -> str:
        return str(args["command"])

    async def execute(self, args: dict[str, Any]) -> ToolResult:
        env = {k: os.environ[k] for k in _SAFE_ENV if k in os.environ}
        env["HOME"] = str(self.root)
        proc = await asyncio.create_subprocess_exec(
            *keeper_argv(["/bin/sh", "-c", args["command"]], map(str, self.hidden)),
            cwd=self.root,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        kept = bytearray()
        total = 0
        keep_bytes = self.output_max * 4  # enough bytes for output_max characters

        async def pump() -> None:
            nonlocal total
            assert proc.stdout is not None
            while chunk := await proc.stdout.read(65536):
                total += len(chunk)
                kept.extend(chunk[: max(0, keep_bytes - len(kept))])
            await proc.wait()

        timed_out = False
        try:
            async with asyncio.timeout(self.command_timeout_s):
                await pump()
        except TimeoutError:
            timed_out = True
        finally:  # also on cancellation: the keeper kills everything the command started
            await _stop(proc)
        return ToolResult.ok(self._report(proc.returncode, kept, total, timed_out))

    def _report(self, code: int | None, kept: bytearray, total: int, timed_out: bool) -> str:
        text = kept.decode("utf-8", errors="replace")
        if len(text) > self.output_max or total > len(kept):
            text = f"{text[: self.output_max]}\n[… output cut: {total} bytes in all]"
        if timed_out:
            status = f"Timed out after {self.command_timeout_s:g} s; the command was killed."
        else:
            status = f"Exit code {code}."
        return f"{status}\n{text}" if text.strip() else f"{status} No output."


async def _stop(proc: asyncio.subprocess.Process) -> None:
    """Ask the keeper to kill everything and exit; if it does not within 5 s, kill its group."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(5):
                await proc.wait()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(5):
            await proc.wait()
