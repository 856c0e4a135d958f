"""run_command in bubblewrap, attacked for real: a command (as an injected model would ask for)
tries to read the daemon's store, config and credentials, reach a server on 127.0.0.1, fork
without end, eat memory, write outside the workspace. Each runs through the real `bwrap`, with
small limits. Renames (`git mv`, from a temp file) are in tests/test_builtins_workspace.py."""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from pathlib import Path

import pytest

from tests.fakes.openai_server import text, tool_call
from tests.sandbox import require_bwrap
from tests.test_security_processes import survivors
from tests.test_security_secrets import Daemon, tool_output
from tools.builtins import builtin_tools
from tools.config import RunCommandConfig, ToolsConfig
from tools.registry import ToolRegistry


@pytest.fixture(autouse=True)
def _bwrap() -> None:
    require_bwrap()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


def registry(workspace: Path, **settings: object) -> ToolRegistry:
    config = ToolsConfig(
        builtins=["run_command"],
        workspace=workspace,
        command_timeout_s=30,
        run_command=RunCommandConfig.model_validate(settings),
    )
    tools = ToolRegistry()
    for tool in builtin_tools(config, memory=None):
        tools.register(tool)
    return tools


async def run(workspace: Path, command: str, **settings: object) -> str:
    result = await registry(workspace, **settings).execute("run_command", {"command": command})
    return result.for_llm


async def test_the_daemons_store_config_credentials_and_home_are_not_there(tmp_path, llm):
    daemon = Daemon(tmp_path, llm)  # the real `relaybot chat`, run_command in bwrap (default)
    store = tmp_path / "state.db"
    attack = f"""
for f in {store} {daemon.config} {daemon.credentials}/RB_LLM_KEY "$CREDENTIALS_DIRECTORY" \\
         {Path.home()} /etc/shadow /run; do
  cat "$f" >/dev/null 2>&1 || ls "$f" >/dev/null 2>&1 && echo "READ $f" || echo "absent $f"
done
# [t]: neither grep's own command line nor bwrap's (holding this script) matches
grep -l -- '-m bot cha[t]' /proc/[0-9]*/cmdline 2>/dev/null | sed 's/^/DAEMON /'
ls /proc | grep -c '^[0-9]' | sed 's/^/processes /'
env
"""
    llm.script(tool_call("run_command", {"command": attack}), text("no luck"))
    out, err = await daemon.chat(b"please run this\ny\n")
    assert "no luck" in out.splitlines()
    result = tool_output(llm, 0)
    assert store.exists() and "READ" not in result and "DAEMON" not in result
    assert result.count("absent ") == 7
    processes = int(result.split("processes ")[1].split()[0])
    assert processes < 10  # bwrap's init, sh, ls, grep and sed: its own PID namespace
    assert daemon.leaked(result) == [] and daemon.leaked(json.dumps(llm.requests) + err) == []


class Listener:
    """A TCP server on 127.0.0.1 that records what reaches it."""

    def __init__(self) -> None:
        self.received: asyncio.Queue[bytes] = asyncio.Queue()

    async def __aenter__(self) -> int:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await self.received.put(await reader.read(100))
            writer.close()

        self.server = await asyncio.start_server(handle, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()
        await self.server.wait_closed()


def connect(port: int) -> str:
    return (
        "python3 -c 'import socket\n"
        f's = socket.create_connection(("127.0.0.1", {port}), timeout=5)\n'
        's.sendall(b"hello"); print("connected")\''
    )


async def test_127_0_0_1_cannot_be_reached_without_network(workspace):
    listener = Listener()
    async with listener as port:
        result = await run(workspace, connect(port))
    assert "ConnectionRefusedError" in result and "connected" not in result
    assert listener.received.empty()


async def test_with_network_the_listener_is_reached(workspace):
    listener = Listener()
    async with listener as port:
        result = await run(workspace, connect(port), network=True)
        assert await asyncio.wait_for(listener.received.get(), 10) == b"hello"
    assert result == "Exit code 0.\nconnected\n"


async def test_a_fork_bomb_is_stopped(workspace):
    mark = str(random.randrange(10**6, 10**7))
    # 4095 processes if nothing stopped it (bounded, so a broken limit cannot sink the machine)
    bomb = (
        f"f(){{ echo >> ran; [ $1 -lt 11 ] && {{ f $(($1+1)) & f $(($1+1)); }}; sleep {mark}; }}\n"
        "f 0"
    )
    started = time.monotonic()
    result = await run(workspace, bomb, processes=20)
    assert result.startswith("Exit code 137.\n")  # killed (its last words may come first)
    assert result.endswith("relaybot: stopped: more than 20 processes\n")
    assert time.monotonic() - started < 15
    ran = len((workspace / "ran").read_text().splitlines())
    print(f"the fork bomb started {ran} processes")  # the count's overshoot, shown with -s
    assert 20 < ran < 4095, ran  # it forked past the limit, and was stopped before the end
    assert survivors([mark]) == []


async def test_a_memory_hog_is_stopped(workspace):
    hog = "python3 -c 'a = []\nwhile True: a.append(bytearray(10**7))'"
    started = time.monotonic()
    result = await run(workspace, hog, memory_mb=200)
    assert result.startswith("Exit code 1.\n") and result.endswith("MemoryError\n")
    assert time.monotonic() - started < 15


async def test_cpu_time_and_file_size_are_limited(workspace):
    result = await run(workspace, "python3 -c 'while True: pass'", cpu_s=1)
    assert result.startswith("Exit code 152.")  # SIGXCPU
    result = await run(workspace, "head -c 3000000 /dev/zero > big", file_size_mb=1)
    assert result.startswith("Exit code 153.")  # SIGXFSZ
    assert (workspace / "big").stat().st_size == 1 << 20


async def test_files_land_only_in_the_workspace(workspace):
    name = f"sandbox-{random.randrange(10**9)}"
    outside = [f"/{name}", f"/etc/{name}", f"/usr/{name}", f"/tmp/{name}"]
    outside.append(str(workspace.parent / name))  # right beside the workspace
    command = "".join(f"{{ echo x > {p}; }} 2>/dev/null && echo WROTE {p}\n" for p in outside)
    command += f"echo x > {name} && echo x > $TMPDIR/{name} && echo x > /var/tmp/{name}.v\n"
    result = await run(workspace, command)
    assert result == "Exit code 0. No output."
    assert not any(map(os.path.lexists, [*outside, f"/var/tmp/{name}.v"]))
    assert (workspace / name).read_text() == "x\n"
    assert {p.name for p in (workspace / ".tmp").iterdir()} == {name, f"{name}.v"}
