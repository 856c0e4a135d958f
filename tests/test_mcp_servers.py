"""relaybot against MCP servers as the ecosystem ships them: the reference servers from npm
(`@modelcontextprotocol/server-everything`, `server-filesystem`, pinned in
tests/mcp_servers/package-lock.json) and `mcp-server-time` from PyPI (the dev extra), each
started by the real `relaybot tools` command."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.prerequisites import mcp_server
from tests.test_mcp import HttpServer
from tools.config import McpServerConfig
from tools.mcp import McpManager
from tools.registry import ToolRegistry


async def tools_listing(tmp_path: Path, servers: str) -> tuple[int, dict[str, str], str, str]:
    """`relaybot tools`' exit code, its tools' first lines by name, its stderr and stdout."""
    cfg = tmp_path / "config.toml"
    cfg.write_text(
        f'[storage]\npath = "{tmp_path / "state.db"}"\n[tools]\nbuiltins = []\n{servers}'
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "tools",
        "-c",
        str(cfg),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=os.environ.copy(),
    )
    out_b, err_b = await asyncio.wait_for(proc.communicate(), 60)
    out = out_b.decode()
    heads = {line.split()[0]: line for line in out.splitlines() if line and not line[0].isspace()}
    heads.pop("not", None)  # "not offered: ...": read from the output by not_offered
    return proc.returncode or 0, heads, err_b.decode(), out


def not_offered(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("not offered: ")]


def server(name: str, command: list[str], *args: str) -> str:
    argv = ", ".join(f'"{a}"' for a in [*command[1:], *args])
    return f'[[mcp.servers]]\nname = "{name}"\ncommand = "{command[0]}"\nargs = [{argv}]\n'


@pytest.mark.needs("mcp-servers")
async def test_the_reference_servers_tools_are_listed(tmp_path: Path) -> None:
    (tmp_path / "files").mkdir()
    servers = server("everything", mcp_server("mcp-server-everything"), "stdio") + server(
        "files", mcp_server("mcp-server-filesystem"), str(tmp_path / "files")
    )
    code, heads, err, out = await tools_listing(tmp_path, servers)
    assert code == 0, err
    assert heads["everything__echo"].endswith("(mcp:everything)  “Echo Tool”")  # its title
    assert "[safe]" in heads["files__read_text_file"]  # readOnlyHint
    assert "[destructive]" in heads["files__write_file"]
    # execution.taskSupport: required, and the server announces tasks: a background job
    assert "[destructive]" in heads["everything__simulate-research-query"]
    assert not_offered(out) == []


async def test_the_time_server_from_pypi(tmp_path: Path) -> None:
    program = shutil.which("mcp-server-time", path=str(Path(sys.executable).parent))
    assert program, "mcp-server-time comes with the dev extra"
    code, heads, err, _ = await tools_listing(tmp_path, server("time", [program]))
    assert code == 0, err
    assert "(mcp:time)" in heads["time__get_current_time"]


@pytest.mark.needs("mcp-servers")
async def test_exclude_leaves_tools_out_and_says_so(tmp_path: Path) -> None:
    everything = server("everything", mcp_server("mcp-server-everything"), "stdio")
    code, heads, err, out = await tools_listing(tmp_path, everything + 'exclude = ["echo"]\n')
    assert code == 0, err
    assert "everything__echo" not in heads and "everything__get-sum" in heads
    assert "not offered: echo (mcp:everything): left out by tools/exclude" in not_offered(out)


@pytest.mark.needs("mcp-servers")
async def test_a_restarted_everything_server_gets_a_new_session_at_once(caplog) -> None:
    caplog.set_level(logging.INFO, logger="tools.mcp")
    program = [*mcp_server("mcp-server-everything"), "streamableHttp"]
    everything, registry = HttpServer(program=program), ToolRegistry()
    await everything.start()
    try:
        config = McpServerConfig(name="everything", url=everything.url)
        async with McpManager([config], registry, keepalive_s=3600):  # no ping notices
            echo = await registry.execute("everything__echo", {"message": "one"})
            assert echo.for_llm == "Echo: one"
            await everything.kill()
            await everything.start()  # a new process: it knows no session
            echo = await registry.execute("everything__echo", {"message": "two"})
            assert echo.for_llm == "Echo: two"  # the first call after, not a retry by the model
    finally:
        await everything.kill()
    assert "MCP server everything forgot the session; starting a new one" in caplog.text
