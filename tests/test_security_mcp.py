"""Attacks through a stdio MCP server: a careless server printing its token to stderr, a server
reading the daemon's credentials, a server leaving processes behind."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot import _logging, parse_config
from bot._logging import setup_logging
from tests.sandbox import require_bwrap
from tools.builtins import bwrap_path, landlock_abi
from tools.config import McpServerConfig
from tools.mcp import McpManager
from tools.registry import ToolRegistry

FAKE = str(Path(__file__).parent / "fakes" / "mcp_server.py")
FAST = {"backoff_s": (0.05, 0.2), "connect_timeout_s": 20.0}
SECRET = "tok-7f3a9c2e5b1d"


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    noisy = {name: logging.getLogger(name).level for name in _logging._NOISY}
    yield
    for handler in [h for h in root.handlers if h not in handlers]:
        root.removeHandler(handler)
    root.setLevel(level)
    for name, value in noisy.items():
        logging.getLogger(name).setLevel(value)
    logging.captureWarnings(False)


class LineWaiter(logging.Handler):
    """Sets `seen` (from any thread) once a record's message contains `needle`."""

    def __init__(self, needle: str) -> None:
        super().__init__()
        self.needle = needle
        self.seen = asyncio.Event()
        self.loop = asyncio.get_running_loop()

    def emit(self, record: logging.LogRecord) -> None:
        if self.needle in record.getMessage():
            self.loop.call_soon_threadsafe(self.seen.set)


async def test_server_stderr_is_logged_through_the_redaction(capfd, restore_logging, monkeypatch):
    monkeypatch.delenv("JOURNAL_STREAM", raising=False)
    server = {"name": "careless", "command": sys.executable, "args": [FAKE]}
    config = parse_config({"mcp": {"servers": [server | {"env": {"SERVICE_TOKEN": SECRET}}]}})
    setup_logging("INFO", secrets=config.secrets())
    waiter = LineWaiter("SERVICE_TOKEN=")
    logging.getLogger("tools.mcp").addHandler(waiter)
    registry = ToolRegistry()
    try:
        async with McpManager(config.mcp.servers, registry, **FAST):
            result = await registry.execute("careless__log_env", {"name": "SERVICE_TOKEN"})
            assert result.for_llm == "logged"
            await asyncio.wait_for(waiter.seen.wait(), 10)
    finally:
        logging.getLogger("tools.mcp").removeHandler(waiter)
    err = capfd.readouterr().err
    assert "MCP server careless: SERVICE_TOKEN=***" in err  # a log record, not raw output
    assert SECRET not in err


@pytest.mark.skipif(landlock_abi() < 1, reason="needs Landlock (Linux 5.13)")
async def test_a_server_cannot_read_the_credentials_directory(tmp_path, monkeypatch):
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    (credentials / "OPENAI_API_KEY").write_text(SECRET)
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(credentials))
    registry = ToolRegistry()
    servers = [McpServerConfig(name="nosy", command=sys.executable, args=[FAKE])]
    async with McpManager(servers, registry, **FAST):
        stolen = await registry.execute(
            "nosy__read_path", {"path": str(credentials / "OPENAI_API_KEY")}
        )
        fake_source = await registry.execute("nosy__read_path", {"path": FAKE})
    assert stolen.for_llm == "PermissionError: Permission denied"
    assert "A real MCP server for tests" in fake_source.for_llm  # reading elsewhere still works


async def test_what_a_server_detaches_dies_with_it():
    registry = ToolRegistry()
    servers = [McpServerConfig(name="leaky", command=sys.executable, args=[FAKE])]
    async with McpManager(servers, registry, **FAST):
        pid = int((await registry.execute("leaky__detach", {"seconds": 300})).for_llm)
        assert cmdline(pid) == b"sleep\x00300\x00"
    assert cmdline(pid) is None


def cmdline(pid: int) -> bytes | None:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return None


async def test_a_sandboxed_server_sees_only_its_folders(tmp_path, monkeypatch):
    require_bwrap()
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    (credentials / "OPENAI_API_KEY").write_text(SECRET)
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(credentials))
    share = tmp_path / "share"
    share.mkdir()
    (share / "note.txt").write_text("shared")
    (tmp_path / "beside.txt").write_text("not shared")
    repo = Path(__file__).parent.parent  # the fake server, the venv
    server = McpServerConfig(
        name="boxed",
        command=sys.executable,
        args=[FAKE],
        sandbox="bwrap",
        sandbox_writable=[share],
        sandbox_readable=[repo, Path(sys.base_prefix)],
    )
    registry = ToolRegistry()
    async with McpManager([server], registry, **FAST):

        async def read(path: Path) -> str:
            return (await registry.execute("boxed__read_path", {"path": str(path)})).for_llm

        assert await read(share / "note.txt") == "shared"
        assert (
            await read(credentials / "OPENAI_API_KEY")
            == "FileNotFoundError: No such file or directory"
        )
        assert await read(tmp_path / "beside.txt") == "FileNotFoundError: No such file or directory"
        assert (await read(Path("/proc/1/cmdline"))).startswith(f"{bwrap_path()}\0")  # own PIDs


async def test_a_sandboxed_server_outside_the_sandbox_is_a_clear_error(tmp_path, caplog):
    require_bwrap()
    server = McpServerConfig(name="unseen", command=sys.executable, args=[FAKE], sandbox="bwrap")
    registry = ToolRegistry()
    async with McpManager([server], registry, **FAST):
        assert "unseen__read_path" not in registry
    assert "is outside the sandbox: add its folder to sandbox_readable" in caplog.text
