"""A background job's place (ToolContext.job): a resumable tool keeps where it is with its job,
and after a restart resumes from there; a job a person cancels knows it was stopped, one that
a shutdown cuts off does not (it resumes)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from bot.app import App
from bot.config import Config
from engine.store import JobState
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.fakes.recording_channel import RecordingChannel
from tests.test_mcp_content import turn
from tools import ContextualTool, ToolResult


class Counting(ContextualTool):
    """Keeps "at 1" with its job, then runs until it is cut off; resumed, it says from where."""

    name = "count_up"
    description = "Count up in the background."
    parameters: dict[str, Any] = {"type": "object", "properties": {}}
    background = True
    resumable = True

    def __init__(self) -> None:
        self.kept = asyncio.Event()
        self.stopped: list[bool] = []  # job.stopped() as each cut-off run saw it

    async def execute(self, args: dict[str, Any]) -> ToolResult:
        job = self.context.job
        assert job is not None
        if job.resume is not None:
            return ToolResult.ok(f"resumed {job.resume}")
        await job.keep("at 1")
        self.kept.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.stopped.append(job.stopped())
            raise
        return ToolResult.ok("never")


@asynccontextmanager
async def running(config: Config, tool: Counting) -> AsyncIterator[tuple[App, RecordingChannel]]:
    channel = RecordingChannel()
    async with App(config, channels=[channel], extra_tools=(tool,)) as app:
        app.dispatcher.settings.allowed_users["test"] = {"u1"}
        yield app, channel


@pytest.fixture
def counting() -> Counting:
    return Counting()


async def test_a_resumable_job_resumes_from_where_it_kept_itself(
    make_config: Callable[..., Config], llm: FakeOpenAI, counting: Counting
) -> None:
    config = make_config()
    llm.script(tool_call("count_up", {}), text("Counting."), text("Done counting."))
    async with running(config, counting) as (app, channel):
        assert await turn(app, channel, "count") == "Counting."
        await asyncio.wait_for(counting.kept.wait(), 10)
    assert counting.stopped == [False]  # a shutdown: not stopped by anyone
    async with running(config, Counting()) as (app, channel):
        await channel.wait_for("send", 1, chat_id="c", timeout=10)
    assert llm.requests[2]["messages"][-1]["content"].endswith("finished: resumed at 1")


async def test_a_job_cancelled_on_purpose_knows_it_was_stopped(
    make_config: Callable[..., Config], llm: FakeOpenAI, counting: Counting
) -> None:
    llm.script(tool_call("count_up", {}), text("Counting."))
    async with running(make_config(), counting) as (app, channel):
        assert await turn(app, channel, "count") == "Counting."
        await asyncio.wait_for(counting.kept.wait(), 10)
        [job] = await app.store.jobs.in_state(JobState.RUNNING)
        assert job.resume == "at 1"
        await app.dispatcher.background.runner.cancel([job.id])
        assert counting.stopped == [True]
