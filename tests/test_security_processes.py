"""Attacks by a command run through run_command (as an injected model would ask for one): it
tries to outlive the call with `setsid` and double forks, and to kill its keeper to escape.
Whatever it starts is gone when the call returns: on completion, at the time limit and when the
call is cancelled, in bubblewrap and without it (`sandbox = "none"`). Processes are found through
/proc by their command lines (and, without bubblewrap's PID namespace, their pid files)."""

from __future__ import annotations

import asyncio
import os
import random
from pathlib import Path

import pytest

from tests.sandbox import SANDBOXES, require_bwrap
from tools.builtins import builtin_tools, landlock_abi
from tools.config import RunCommandConfig, ToolsConfig
from tools.registry import ToolRegistry

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


def run_command(workspace: Path, timeout_s: float, sandbox: str = "none") -> ToolRegistry:
    config = ToolsConfig(
        builtins=["run_command"],
        workspace=workspace,
        command_timeout_s=timeout_s,
        run_command=RunCommandConfig(sandbox=sandbox),
    )
    registry = ToolRegistry()
    for tool in builtin_tools(config, memory=None):
        registry.register(tool)
    return registry


@pytest.fixture(params=SANDBOXES)
def sandbox(request: pytest.FixtureRequest) -> str:
    if request.param == "bwrap":
        require_bwrap()
    return str(request.param)


@pytest.fixture
def registry(workspace: Path, sandbox: str) -> ToolRegistry:
    return run_command(workspace, timeout_s=30, sandbox=sandbox)


def escapes() -> tuple[str, list[str]]:
    """A command that leaves three processes behind, each detached its own way, and waits
    until each has written its pid file; and the sleep durations that mark them."""
    marks = [str(random.randrange(10**6, 10**7)) for _ in range(3)]
    command = (
        f"setsid sh -c 'echo $$ > p1; exec sleep {marks[0]}' </dev/null >/dev/null 2>&1 &\n"
        f"( (sh -c 'echo $$ > p2; exec sleep {marks[1]}' </dev/null >/dev/null 2>&1 &) & )\n"
        f"nohup sh -c 'echo $$ > p3; exec setsid sleep {marks[2]}' </dev/null >/dev/null 2>&1 &\n"
        "while [ ! -s p1 ] || [ ! -s p2 ] || [ ! -s p3 ]; do :; done\n"
        "echo started\n"
    )
    return command, marks


def survivors(marks: list[str]) -> list[str]:
    """Command lines of live processes (zombies count as dead) running `sleep <mark>`."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes()
            state = (proc / "stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if state != b"Z" and any(cmdline == f"sleep\0{m}\0".encode() for m in marks):
            found.append(cmdline.decode().replace("\0", " "))
    return found


async def all_running(marks: list[str]) -> None:
    """Wait until a `sleep <mark>` runs for each mark (other processes: no event to wait on)."""
    async with asyncio.timeout(10):
        while len(survivors(marks)) < len(marks):  # noqa: ASYNC110
            await asyncio.sleep(0.01)


def alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def pids(workspace: Path) -> list[int]:
    return [int((workspace / f"p{i}").read_text()) for i in (1, 2, 3)]


async def test_detached_children_die_when_the_command_ends(registry, workspace, sandbox):
    command, marks = escapes()
    result = await registry.execute("run_command", {"command": command + "echo done"})
    assert result.for_llm == "Exit code 0.\nstarted\ndone\n"  # no wait for the stragglers
    assert all(pid > 0 for pid in pids(workspace))  # each one really ran
    assert survivors(marks) == []
    if sandbox == "none":  # else they are the pids of bubblewrap's namespace
        assert not any(alive(pid) for pid in pids(workspace))


async def test_detached_children_die_at_the_time_limit(workspace, sandbox):
    command, marks = escapes()
    registry = run_command(workspace, timeout_s=3, sandbox=sandbox)
    result = await registry.execute("run_command", {"command": command + "sleep 60"})
    assert result.for_llm == "Timed out after 3 s; the command was killed.\nstarted\n"
    assert survivors(marks) == []


async def test_detached_children_die_when_the_call_is_cancelled(registry, workspace):
    command, marks = escapes()
    ready = workspace / "ready"
    os.mkfifo(ready)
    command += "echo ready > ready; sleep 60"
    call = asyncio.create_task(registry.execute("run_command", {"command": command}))
    # the command writes to the FIFO once every straggler has written its pid file
    assert await asyncio.wait_for(asyncio.to_thread(ready.read_text), 10) == "ready\n"
    await all_running(marks)  # the last one's pid file comes before its setsid execs sleep
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert survivors(marks) == []


@pytest.mark.skipif(landlock_abi() < 6, reason="needs Landlock signal scoping (Linux 6.12)")
async def test_the_command_cannot_kill_its_keeper_to_escape(workspace):
    registry = run_command(workspace, timeout_s=30, sandbox="none")  # bwrap: the keeper is unseen
    mark = str(random.randrange(10**6, 10**7))
    command = (
        f"setsid sleep {mark} </dev/null >/dev/null 2>&1 &\n"
        "grep -q _sandbox.py /proc/$PPID/cmdline && kill -KILL $PPID && echo keeper killed\n"
        f"kill -0 {os.getpid()} && echo daemon signalled\n"  # -0: checked, never sent
        "echo still here"
    )
    result = await registry.execute("run_command", {"command": command})
    assert "killed" not in result.for_llm and "signalled" not in result.for_llm
    assert result.for_llm.count("Operation not permitted") == 2
    assert result.for_llm.endswith("still here\n")
    assert survivors([mark]) == []
