"""run_command: a shell command in the workspace, in a sandbox, with limits on its time, CPU,
memory, processes, file size and output."""

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
from tools.builtins._bwrap import TMP, Jail, bwrap_argv, bwrap_path, nproc_argv, secret_paths
from tools.builtins._sandbox import keeper_argv, landlock_abi
from tools.config import RunCommandConfig

log = logging.getLogger(__name__)

_SAFE_ENV = ("PATH", "LANG", "LC_ALL", "TZ")


class RunCommand(Tool):
    """Runs `/bin/sh -c <command>` in the workspace, in bubblewrap (`_bwrap.py`: the workspace
    the only thing writable, nothing of the daemon's visible, no network unless
    `[tools.run_command] network`), under a keeper process (`_sandbox.py`).

    The command gets a minimal environment (no tokens or API keys from the daemon's) and no
    stdin. Its keeper sets the rlimits, stops it past `processes`, and kills everything it
    started, however detached, when the shell exits; a time limit or a cancelled call sends
    the keeper SIGTERM, which does the same. The `kept` folders (the skills) are bound read-only
    into the sandbox, so a skill's scripts run and nothing changes them. With `sandbox = "none"`
    the command runs beside the daemon, unable to read only `hidden` paths (the systemd
    credentials directory is always one) and the daemon's /proc entries, where the kernel has
    Landlock; it can then change the skills folders too.
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
        config: RunCommandConfig | None = None,
        kept: Iterable[Path] = (),
    ) -> None:
        self.root = root
        self.config = config or RunCommandConfig()
        self.kept = tuple(kept)  # the skills folders: readable in the sandbox, never writable
        self.hidden = [*hidden, *map(Path, secret_paths())]
        if self.config.sandbox == "none" and self.hidden and landlock_abi() < 1:
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
            + (" Commands have no network access." if self._offline() else "")
        )

    def _offline(self) -> bool:
        return self.config.sandbox == "bwrap" and not self.config.network

    def describe_call(self, args: dict[str, Any]) -> str:
        first = args["command"].strip().split("\n")[0]
        shown = first if len(first) <= 60 and "\n" not in args["command"].strip() else "a command"
        return f"Run {shown} in the workspace"

    def describe_action(self, args: dict[str, Any]) -> str:
        return str(args["command"])

    async def execute(self, args: dict[str, Any]) -> ToolResult:
        env = {k: os.environ[k] for k in _SAFE_ENV if k in os.environ}
        env["HOME"] = str(self.root)
        env["TMPDIR"] = str(self.root / TMP)  # bwrap sets it too; renames from it stay on one mount
        try:
            argv = self._argv(args["command"])
        except OSError as exc:
            return ToolResult.fail(f"The sandbox could not be set up: {exc}")
        proc = await asyncio.create_subprocess_exec(
            *argv,
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

    def _argv(self, command: str) -> list[str]:
        """The keeper's command line for `command`, in the sandbox the config names."""
        cfg = self.config
        program = ["/bin/sh", "-c", command]
        (self.root / TMP).mkdir(exist_ok=True)
        if cfg.sandbox == "bwrap":
            bwrap = bwrap_path()
            if bwrap is None:
                raise FileNotFoundError("bubblewrap (bwrap) is not installed")
            kept = (p for p in self.kept if p.is_dir())  # a skills folder not made yet: nothing
            jail = Jail((self.root,), (*cfg.readable, *kept), cfg.network)
            program = bwrap_argv(bwrap, jail, nproc_argv(program, cfg.processes))
        limits = {"cpu": cfg.cpu_s, "as": cfg.memory_mb << 20, "fsize": cfg.file_size_mb << 20}
        return keeper_argv(program, map(str, self.hidden), limits=limits, procs=cfg.processes)

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
    """Ask the keeper to kill everything and exit; if it does not within 5 s, kill its group.

    Only then: once the keeper has exited (and killed what it started) and been reaped, its pid
    is free, and a process given that pid later that starts a session of its own (any `setsid`)
    leads a group of that number, which `killpg` would kill: the kernel hands pids out again
    soon where `pid_max` is 32,768 (a test's detached `sleep`, seen gone 3 runs in 14, most
    likely went so)."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(5):
                await proc.wait()
    if proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # alive, unreaped: the group is still its own
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(5):
            await proc.wait()
