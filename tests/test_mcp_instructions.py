"""An MCP server's `instructions` in the system prompt (issue 42): under the server's name, cut at
a bound, left out with `instructions = false`; through the daemon with the fake LLM, and from the
real server-everything."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bot.app import App
from bot.config import Config
from tests.fakes.mcp_server import INSTRUCTIONS
from tests.fakes.openai_server import FakeOpenAI, text
from tests.fakes.telegram_server import FakeTelegram
from tests.prerequisites import mcp_server
from tests.test_mcp import FAST, stdio_server
from tests.test_telegram import telegram_config
from tools.config import McpServerConfig
from tools.mcp import McpManager
from tools.registry import ToolRegistry

DM = 1001


async def test_the_servers_instructions_are_in_the_system_prompt(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    llm.script(text("Noted."))
    async with FakeTelegram() as tg:
        cfg = telegram_config(make_config, tg)
        cfg.mcp.servers += [stdio_server(), stdio_server("quiet", instructions=False)]
        async with App(cfg):
            tg.inject_message(DM, DM, "what does relay mean?")
            await tg.wait_for_call("sendMessage", lambda p: p.get("text") == "Noted.")
    system = llm.requests[-1]["messages"][0]
    assert system["role"] == "system"
    assert f"## fake (tools named fake__*)\n{INSTRUCTIONS}" in system["content"]
    assert "## quiet" not in system["content"]  # its instructions are turned off
    assert system["content"].count(INSTRUCTIONS) == 1


@pytest.mark.needs("mcp-servers")
async def test_server_everythings_instructions_bounded() -> None:
    command, *args = mcp_server("mcp-server-everything")
    everything = McpServerConfig(name="everything", command=command, args=[*args, "stdio"])
    async with McpManager([everything], ToolRegistry(), **FAST) as mcp:
        prompt = await mcp.prompt("telegram", "1", "1", True)
    head, own = prompt.split("\n## everything (tools named everything__*)\n")
    assert head.startswith("# MCP servers\n")
    assert len(own) <= 2_100  # 2,000 characters and the note of what was cut
    assert own.strip()
