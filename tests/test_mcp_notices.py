"""What an MCP server tells relaybot unasked (issue 42): its log messages reach the daemon's log
at the mapped level, a changed tool list is listed again and offered without a restart, and a
call's progress shows in the turn's status line, under the tool's title. The fake server
(tests/fakes/mcp_server.py) over stdio, through the daemon where a user sees it, and
server-everything's simulated logging."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bot.app import App
from bot.config import Config
from engine.chat._turns._progress import Progress
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.fakes.telegram_server import FakeTelegram
from tests.prerequisites import mcp_server
from tests.test_mcp import FAST, stdio_server
from tests.test_telegram import telegram_config
from tools import ToolContext
from tools.config import McpServerConfig
from tools.mcp import McpManager
from tools.registry import ToolRegistry

DM = 1001


class Records(logging.Handler):
    """The `tools.mcp` records, and an event set when one contains `wanted`."""

    def __init__(self, wanted: str) -> None:
        super().__init__(logging.DEBUG)
        self.wanted = wanted
        self.records: list[logging.LogRecord] = []
        self.seen = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        if self.wanted in record.getMessage():
            self.seen.set()

    def find(self) -> logging.LogRecord:
        return next(r for r in self.records if self.wanted in r.getMessage())


@pytest.fixture
def records() -> Iterator[Records]:
    handler, logger = Records("MCP server "), logging.getLogger("tools.mcp")
    logger.addHandler(handler)
    level, logger.level = logger.level, logging.DEBUG
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)


async def test_log_messages_reach_the_log_at_their_level(records: Records) -> None:
    registry = ToolRegistry()
    async with McpManager([stdio_server()], registry, **FAST):
        for level, text in [("warning", "disk nearly full"), ("emergency", "on fire")]:
            records.wanted, records.seen = text, asyncio.Event()
            assert (
                await registry.execute("fake__chatty", {"level": level, "text": text})
            ).for_llm == "said"
            async with asyncio.timeout(10):
                await records.seen.wait()
            record = records.find()
            assert record.getMessage() == f"MCP server fake/chatter: {text}"
            assert (
                record.levelno == {"warning": logging.WARNING, "emergency": logging.CRITICAL}[level]
            )


async def test_a_changed_tool_list_is_offered_without_a_restart() -> None:
    registry, changed = ToolRegistry(), asyncio.Event()
    async with McpManager([stdio_server()], registry, on_change=changed.set, **FAST) as mcp:
        changed.clear()  # set once by the start
        assert registry.get("fake__fresh") is None
        assert (
            await registry.execute("fake__add_tool", {"name": "fresh"})
        ).for_llm == "added fresh"
        async with asyncio.timeout(10):
            await changed.wait()
        assert "fake__fresh" in {info.name for info in mcp.tools()}
        assert (await registry.execute("fake__fresh", {})).for_llm == "fresh is new"
        assert (await registry.execute("fake__lookup", {"word": "x"})).for_llm.endswith("x")


@pytest.mark.needs("mcp-servers")
async def test_server_everythings_log_messages(records: Records) -> None:
    command, *args = mcp_server("mcp-server-everything")
    everything = McpServerConfig(name="everything", command=command, args=[*args, "stdio"])
    registry = ToolRegistry()
    async with McpManager([everything], registry, **FAST):
        records.wanted = "-level message"  # "Info-level message", every 5 s at a random level
        await registry.execute("everything__toggle-simulated-logging", {})
        async with asyncio.timeout(30):
            await records.seen.wait()
    record = records.find()
    assert record.getMessage().startswith("MCP server everything: ")
    assert record.levelno in (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR, 50)


async def test_progress_notifications_are_told_in_words() -> None:
    registry, told = ToolRegistry(), []
    async with McpManager([stdio_server()], registry, **FAST):
        context = ToolContext(progress=told.append)
        result = await registry.execute("fake__steps", {"count": 3}, context)
        asked = registry.get("fake__steps").describe_call({"count": 3})  # a confirmation's line
        assert asked.startswith("Step Counter: Count steps, reporting progress after each")
    assert result.for_llm == "done"
    assert told == ["33% step 1", "67% step 2", "100% step 3"]


async def test_progress_and_the_title_in_the_turns_status_line(
    make_config: Callable[..., Config], llm: FakeOpenAI, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setattr(Progress, "show_after_s", 0.0)  # show the first step at once
    go = tmp_path / "go"
    os.mkfifo(go)  # the tool waits for a line in it
    llm.script(tool_call("fake__steps", {"count": 4, "until": str(go)}), text("Counted."))
    async with FakeTelegram() as tg:
        cfg = telegram_config(make_config, tg)
        cfg.mcp.servers.append(stdio_server())
        async with App(cfg):
            tg.inject_message(DM, DM, "count four steps")
            shown = await tg.wait_for_call("sendMessage", lambda p: p["text"].startswith("⏳"))
            assert shown.params["text"].startswith("⏳ Step Counter")  # the server's title
            edit = await tg.wait_for_call(
                "editMessageText", lambda p: p["text"].endswith("· 100% step 4")
            )
            await asyncio.to_thread(go.write_text, "go\n")
            await tg.wait_for_call("sendMessage", lambda p: p.get("text") == "Counted.")
    assert edit.params["text"] == f"⏳ Step Counter: {go} · 100% step 4"
