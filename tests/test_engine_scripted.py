"""The engine with the in-process ScriptedModel: no HTTP, a real SQLite store, a recording channel.

Fast checks of the loop and the dispatcher's parts where the provider's SDK is not the point
(the SDK-level behaviour is tested against the fake servers in test_loop.py and elsewhere).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from bot._engine import build_engine
from engine import ModelRequest, SqliteStore
from engine._store import JobState
from engine.chat import Dispatcher, Settings
from engine.loop import ConversationKey, ToolLoop, TurnContext
from engine.models import Message, ScriptedModel, reply
from tests.fakes.recording_channel import RecordingChannel
from tools import AsyncTool, ToolRegistry, ToolResult, tool


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def test_a_tool_result_goes_back_as_a_neutral_tool_part() -> None:
    model = ScriptedModel([reply(None, ("add", {"a": 2, "b": 3})), reply("five")])
    registry = ToolRegistry()
    registry.register(add)
    loop = ToolLoop(model, registry)
    ctx = TurnContext(ConversationKey("t", "c"), "u1", system="be brief")
    result = await loop.run([Message.user("2+3?")], ctx)
    assert result.text == "five" and result.tool_calls == ["add"]
    second: ModelRequest = model.requests[1]
    assert second.system == "be brief"
    assert second.messages[-1].result is not None and second.messages[-1].result.text == "5"
    assert [t.name for t in second.tools] == ["add"]
    assert result.usage.prompt_tokens == 20  # summed over the two requests


class MakeReport(AsyncTool):
    """A tool whose name has a dash, reporting back through its callback."""

    name = "make-report"
    description = "Make the report in the background."
    parameters = {"type": "object", "properties": {}}
    release = asyncio.Event()

    async def execute(self, args: dict) -> ToolResult:
        callback = self.callback

        async def later() -> None:
            await self.release.wait()
            await callback(ToolResult.ok("report ready"))

        asyncio.get_running_loop().create_task(later())
        return ToolResult.started("r1", self.name)


@asynccontextmanager
async def dispatcher(
    tmp_path: Path, model: ScriptedModel, registry: ToolRegistry
) -> AsyncIterator[tuple[Dispatcher, RecordingChannel, SqliteStore]]:
    channel = RecordingChannel()
    async with SqliteStore(tmp_path / "e.db") as store:
        d = build_engine(store, model, registry, Settings(allowed_users={"test": {"u1"}}))
        d.add_channel(channel)
        await d.prepare()
        await channel.start(d)
        await d.start()
        try:
            yield d, channel, store
        finally:
            await d.aclose()


async def test_an_async_tool_named_with_a_dash_reports_back_under_its_name(tmp_path: Path) -> None:
    registry = ToolRegistry()
    registry.register(MakeReport())
    model = ScriptedModel([reply(None, ("make-report", {})), reply("on it"), reply("here it is")])
    async with dispatcher(tmp_path, model, registry) as (d, channel, store):
        await d.handle_inbound(channel.message("report please"))
        await channel.wait_for("send")
        MakeReport.release.set()
        await channel.wait_for("send", 2)
        jobs = await store.jobs.in_state(JobState.DELIVERED)
    assert [j.tool for j in jobs] == ["make-report"]
    injected = model.requests[-1].messages[-1].result
    assert injected is not None and "(make-report) finished: report ready" in injected.text
    assert channel.texts() == ["on it", "here it is"]
