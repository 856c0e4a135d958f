"""MCP: a real MCP server (tests/fakes/mcp_server.py, written with the SDK) over stdio and
streamable HTTP, through McpManager and the ToolRegistry."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from pathlib import Path

import httpx
import pytest

from tests.ports import free_port
from tools import Tier
from tools.config import McpConfig, McpServerConfig
from tools.mcp import McpManager, tool_name
from tools.registry import ToolRegistry

FAKE = str(Path(__file__).parent / "fakes" / "mcp_server.py")
FAST = {"backoff_s": (0.05, 0.2), "connect_timeout_s": 20.0}  # small backoff for tests


def stdio_server(name: str = "fake", **options) -> McpServerConfig:
    return McpServerConfig(name=name, command=sys.executable, args=[FAKE], **options)


@pytest.fixture
async def manager():
    registry = ToolRegistry()
    async with McpManager([stdio_server(call_timeout_s=1)], registry, **FAST) as manager:
        yield manager, registry


async def test_tools_are_registered_with_their_schemas_and_tiers(manager):
    mcp, registry = manager
    tiers = {name: tier for _server, name, tier in mcp.tools()}
    assert tiers["fake__lookup"] is Tier.SAFE  # readOnlyHint: true
    assert tiers["fake__write_note"] is Tier.DESTRUCTIVE  # no annotations: asks first
    lookup = registry.get("fake__lookup")
    assert lookup.parameters["properties"]["word"] == {"title": "Word", "type": "string"}
    assert lookup.parameters["required"] == ["word"]  # the server's schema, verbatim
    assert lookup.description == "Look a word up in the test dictionary."
    assert lookup.safety == {"readOnlyHint": True}
    assert registry.get("fake__write_note").safety == {}
    assert ("fake", "fake__write_note", Tier.DESTRUCTIVE) in mcp.tools()
    assert registry.get("fake__write_note").remote_name == "write_note"


async def test_calls_return_the_text_as_a_tool_result(manager):
    _, registry = manager
    result = await registry.execute("fake__lookup", {"word": "relay"})
    assert result.for_llm == "definition of relay"
    assert result.for_user is None and not result.is_error  # data for the model only
    bad = await registry.execute("fake__lookup", {"wrd": "x"})
    assert bad.is_error and bad.retryable  # checked against the server's schema first


async def test_a_tool_that_raises_gives_an_error_result(manager):
    _, registry = manager
    result = await registry.execute("fake__explode", {})
    assert result.is_error
    assert "Error executing tool explode" in result.for_llm


async def test_per_call_timeout(manager):
    _, registry = manager
    result = await registry.execute("fake__hang", {})
    assert result.is_error
    assert result.for_llm == "MCP tool hang on server fake did not answer within 1 s."
    assert (await registry.execute("fake__lookup", {"word": "still"})).for_llm.endswith("still")


async def test_a_server_that_crashes_is_restarted(manager, caplog):
    caplog.set_level(logging.INFO, logger="tools.mcp")
    _, registry = manager
    first_pid = (await registry.execute("fake__pid", {})).for_llm
    crashed = await registry.execute("fake__crash", {})
    assert crashed.is_error
    assert crashed.for_llm == "MCP server fake stopped during the call; it is being restarted."
    meanwhile = await registry.execute("fake__lookup", {"word": "x"})
    assert meanwhile.is_error
    assert meanwhile.for_llm == "MCP server fake is restarting; try again in a moment."
    pid = await wait_for_success(registry, "fake__pid")
    assert pid != first_pid
    assert "MCP server fake stopped" in caplog.text and "MCP server fake is back" in caplog.text
    # and again: the backoff grows but the server keeps coming back
    await registry.execute("fake__crash", {})
    assert await wait_for_success(registry, "fake__pid") not in (first_pid, pid)


async def wait_for_success(registry: ToolRegistry, name: str, timeout: float = 20) -> str:
    async with asyncio.timeout(timeout):
        while True:
            result = await registry.execute(name, {})
            if not result.is_error:
                return result.for_llm
            assert result.for_llm.startswith("MCP server")
            await asyncio.sleep(0.05)


async def test_trust_annotations_off_makes_every_tool_ask():
    registry = ToolRegistry()
    server = stdio_server(trust_annotations=False, trusted_tools=["pid"])
    async with McpManager([server], registry, **FAST) as mcp:
        tiers = {info.name: info.tier for info in mcp.tools()}
    assert tiers.pop("fake__pid") is Tier.SAFE  # trusted_tools still wins
    assert set(tiers.values()) == {Tier.DESTRUCTIVE}
    assert registry.names() == []  # leaving the manager unregisters its tools


async def test_trusted_tools_are_safe_without_annotations(caplog):
    registry = ToolRegistry()
    server = stdio_server(trusted_tools=["write_note", "no_such_tool"])
    async with McpManager([server], registry, **FAST):
        assert registry.get("fake__write_note").tier is Tier.SAFE
    assert "trusted_tools names no such tool: no_such_tool" in caplog.text


async def test_a_server_that_cannot_start_is_named_and_tried_again(caplog):
    registry = ToolRegistry()
    servers = [
        McpServerConfig(name="ghost", command="relaybot-no-such-mcp-server"),
        McpServerConfig(name="quitter", command=sys.executable, args=["-c", "pass"]),
        stdio_server(),
    ]
    async with McpManager(servers, registry, **FAST) as mcp:
        assert {info.server for info in mcp.tools()} == {"fake"}
        assert (await registry.execute("fake__lookup", {"word": "ok"})).for_llm.endswith("ok")
        down = dict(mcp.down())
        assert down["ghost"] == "FileNotFoundError: no command 'relaybot-no-such-mcp-server' found"
        assert set(down) == {"ghost", "quitter"}
    assert "MCP server ghost could not start (FileNotFoundError: no command" in caplog.text
    assert "MCP server quitter could not start" in caplog.text and "retrying in" in caplog.text


async def test_a_server_that_starts_late_has_its_tools_offered_then(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="tools.mcp")
    registry, changed = ToolRegistry(), asyncio.Event()
    folder = tmp_path / "not yet"
    late = stdio_server("late", cwd=folder)
    async with McpManager([late], registry, on_change=changed.set, **FAST) as mcp:
        assert mcp.tools() == [] and registry.get("late__lookup") is None
        assert mcp.down()[0].reason == f"FileNotFoundError: cwd {folder} is not a folder"
        folder.mkdir()  # the next attempt, after the backoff, starts it
        async with asyncio.timeout(20):
            await changed.wait()
        assert mcp.down() == []
        assert (await registry.execute("late__lookup", {"word": "x"})).for_llm.endswith("x")
    assert "MCP server late started at last, with" in caplog.text


def test_tool_names_are_sanitised():
    assert tool_name("files", "read.file v2") == "files__read_file_v2"
    long = tool_name("server", "x" * 100)
    assert len(long) == 64 and long.startswith("server__xxx")
    assert tool_name("server", "x" * 100) != tool_name("server", "x" * 99 + "y")


def test_server_config_needs_exactly_one_transport():
    with pytest.raises(ValueError, match="exactly one of `command`"):
        McpServerConfig(name="a")
    with pytest.raises(ValueError, match="exactly one of `command`"):
        McpServerConfig(name="a", command="x", url="http://localhost/mcp")
    with pytest.raises(ValueError, match="`headers` and `transport` apply only"):
        McpServerConfig(name="a", command="x", headers={"A": "b"})
    with pytest.raises(ValueError, match="unique"):
        McpConfig(servers=[{"name": "a", "command": "x"}, {"name": "a", "url": "https://e/m"}])
    remote = McpServerConfig(name="a", url="https://e/m", headers={"Authorization": "secret"})
    assert "secret" not in repr(remote)


class HttpServer:
    """An MCP server over HTTP in its own process on 127.0.0.1: the fake (streamable HTTP at
    /mcp, or HTTP+SSE at /sse), or `program` (told its port in PORT, serving /mcp)."""

    def __init__(self, transport: str = "http", program: list[str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/{'sse' if transport == 'sse' else 'mcp'}"
        self.argv = program or [sys.executable, FAKE, f"--{transport}", str(self.port)]
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            *self.argv,
            env={**os.environ, "PORT": str(self.port)},
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        async with asyncio.timeout(30), httpx.AsyncClient() as client:
            while True:
                try:
                    async with client.stream("GET", self.url):  # an SSE answer never ends
                        return
                except httpx.TransportError:
                    await asyncio.sleep(0.1)

    async def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            await self.proc.wait()
            self.proc = None


@pytest.fixture
async def http_server():
    server = HttpServer()
    await server.start()
    yield server
    await server.kill()


async def test_streamable_http_server(http_server):
    registry = ToolRegistry()
    server = McpServerConfig(name="remote", url=http_server.url, headers={"X-Test": "1"})
    async with McpManager([server], registry, **FAST) as mcp:
        assert {i.name for i in mcp.tools()} >= {"remote__lookup", "remote__write_note"}
        result = await registry.execute("remote__lookup", {"word": "http"})
        assert result.for_llm == "definition of http"


async def test_a_remote_server_that_goes_away_is_reconnected(http_server):
    registry = ToolRegistry()
    server = McpServerConfig(name="remote", url=http_server.url)
    async with McpManager([server], registry, keepalive_s=0.2, **FAST):
        first = (await registry.execute("remote__pid", {})).for_llm
        await http_server.kill()
        await asyncio.sleep(0.5)  # the keep-alive ping notices
        down = await registry.execute("remote__pid", {})
        assert down.is_error and down.for_llm.startswith("MCP server remote")
        await http_server.start()
        assert await wait_for_success(registry, "remote__pid") != first


async def test_tools_and_exclude_choose_what_is_offered(caplog):
    registry = ToolRegistry()
    servers = [
        stdio_server("only", tools=["lookup", "pid", "no_such"]),
        stdio_server("but", exclude=["crash", "hang"]),
    ]
    async with McpManager(servers, registry, **FAST) as mcp:
        assert {i.name for i in mcp.tools() if i.server == "only"} == {"only__lookup", "only__pid"}
        offered = {i.name for i in mcp.tools() if i.server == "but"}
        assert "but__crash" not in offered and "but__hang" not in offered
        assert {"but__lookup", "but__write_note"} <= offered
        left = {(o.server, o.name) for o in mcp.left_out()}
        assert ("but", "crash") in left and ("only", "write_note") in left
        assert registry.get("only__write_note") is None
        assert (await registry.execute("only__lookup", {"word": "x"})).for_llm.endswith("x")
    assert "MCP server only: tools names no such tool: no_such" in caplog.text


async def test_cwd_is_the_servers_working_directory(tmp_path):
    (tmp_path / "here.txt").write_text("found in cwd")
    registry = ToolRegistry()
    async with McpManager([stdio_server(cwd=tmp_path)], registry, **FAST):
        result = await registry.execute("fake__read_path", {"path": "here.txt"})
    assert result.for_llm == "found in cwd"


def test_cwd_is_checked():
    with pytest.raises(ValueError, match="`cwd` takes an absolute path"):
        McpServerConfig(name="a", command="x", cwd="relative")
    with pytest.raises(ValueError, match="`cwd` takes an absolute path"):
        McpServerConfig(name="a", url="http://localhost/mcp", cwd="/srv")
    with pytest.raises(ValueError, match="first of sandbox_writable"):
        McpServerConfig(name="a", command="x", cwd="/srv", sandbox="bwrap")


async def test_a_restarted_http_server_gets_a_new_session_at_once(http_server, caplog):
    caplog.set_level(logging.INFO, logger="tools.mcp")
    registry = ToolRegistry()
    server = McpServerConfig(name="remote", url=http_server.url)
    async with McpManager([server], registry, keepalive_s=3600, **FAST):  # no ping notices
        first = (await registry.execute("remote__pid", {})).for_llm
        await http_server.kill()
        await http_server.start()  # a new process: it knows no session
        again = await registry.execute("remote__pid", {})
        assert not again.is_error, again.for_llm
        assert again.for_llm != first
    # Which notices it first depends on timing: the call answered 404 for its session, or the
    # server's event stream closing under the kill; either way a new session at once.
    assert (
        "MCP server remote forgot the session; starting a new one" in caplog.text
        or "MCP server remote is back" in caplog.text
    ), caplog.text


async def test_the_older_http_sse_transport():
    server = HttpServer("sse")
    await server.start()
    try:
        registry = ToolRegistry()
        legacy = McpServerConfig(name="legacy", url=server.url, transport="sse")
        async with McpManager([legacy], registry, **FAST) as mcp:
            assert "legacy__lookup" in {i.name for i in mcp.tools()}
            result = await registry.execute("legacy__lookup", {"word": "sse"})
            assert result.for_llm == "definition of sse"
        guessed = McpServerConfig(name="legacy", url=server.url)  # streamable HTTP, the default
        async with McpManager([guessed], registry, **FAST) as mcp:
            (down,) = mcp.down()
    finally:
        await server.kill()
    assert 'older HTTP+SSE server, set transport = "sse"' in down.reason
