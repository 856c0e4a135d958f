"""MCP tasks through the daemon (App, store, dispatcher, the fake LLM scripted with tool calls)
against server-everything's `simulate-research-query`, which runs only as a task (4 stages of
1 s): the model hears the job started, and the report arrives as a background job's follow-up;
over HTTP a daemon stopped mid-task finds the same task again after its restart and reports it
once; a stdio server's task, which died with the daemon, is reported lost; a server that does
not announce tasks has the tool left out, with the reason."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import mcp.types as types
import pytest

from bot.app import App
from bot.config import Config
from engine import Action, Choice, DecisionStatus, Press
from engine.store import JobState
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.fakes.recording_channel import RecordingChannel
from tests.prerequisites import mcp_server
from tests.test_mcp import HttpServer
from tests.test_mcp_content import FAKE, turn
from tests.test_mcp_servers import not_offered, server, tools_listing
from tests.test_media import running
from tools.mcp import McpTool

pytestmark = pytest.mark.needs("mcp-servers")

RESEARCH = "everything__simulate-research-query"
RUNNING = "The research is running."


def everything(**options: Any) -> dict[str, Any]:
    command = mcp_server("mcp-server-everything")
    return {
        "name": "everything",
        "command": command[0],
        "args": ["stdio"],
        "trusted_tools": ["simulate-research-query"],  # no confirmation: the task is the point
        **options,
    }


@pytest.fixture
async def remote() -> AsyncIterator[HttpServer]:
    """server-everything over streamable HTTP, in its own process."""
    server = HttpServer(program=[*mcp_server("mcp-server-everything"), "streamableHttp"])
    await server.start()
    try:
        yield server
    finally:
        await server.kill()


def over_http(server: HttpServer) -> dict[str, Any]:
    return {"name": "everything", "url": server.url, "trusted_tools": ["simulate-research-query"]}


def tool_texts(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


async def jobs_in(app: App, state: JobState) -> list[str]:
    return [job.id for job in await app.store.jobs.in_state(state)]


@contextlib.asynccontextmanager
async def researching(
    config: Config, llm: FakeOpenAI, then: str = "", **args: Any
) -> AsyncIterator[tuple[App, RecordingChannel]]:
    """A daemon whose first turn starts the research (on tea, unless `args` say otherwise); the
    model says `then` when its result follows."""
    llm.script(tool_call(RESEARCH, {"topic": "tea", **args}), text(RUNNING), text(then))
    async with running(config) as (app, channel):
        assert await turn(app, channel, "research it") == RUNNING
        yield app, channel


async def kept(app: App, job_id: str) -> str:
    """Where the job is, once its tool has kept it (the task's server, id and session)."""
    async with asyncio.timeout(10):
        while True:
            row = await app.store.jobs.get(job_id)
            if row is not None and row.resume is not None:
                return row.resume
            await asyncio.sleep(0.05)


async def test_a_task_runs_as_a_background_job_and_its_report_follows(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    config = make_config(mcp={"servers": [everything()]})
    async with researching(config, llm, "Here is the report on tea.") as (app, channel):
        started = tool_texts(llm.requests[1])[-1]
        assert started.startswith("Started in the background") and RESEARCH in started
        await channel.wait_for("send", 2, chat_id="c", timeout=30)  # the follow-up's answer
        assert channel.texts(chat_id="c")[-1] == "Here is the report on tea."
        assert len(await jobs_in(app, JobState.DELIVERED)) == 1
    report = tool_texts(llm.requests[2])[-1]
    assert "finished: # Research Report: tea" in report
    assert "Stage 4: Generating report" in report


async def test_over_http_a_task_survives_a_restart_and_is_reported_once(
    make_config: Callable[..., Config], llm: FakeOpenAI, remote: HttpServer
) -> None:
    config = make_config(mcp={"servers": [over_http(remote)]})
    async with researching(config, llm, "Here is the report on tea.") as (app, _):
        [job] = await jobs_in(app, JobState.RUNNING)
        assert '"task": ' in await kept(app, job)  # the task, kept with the job
    # the daemon stopped a second into the task's four; a new one starts on the same store
    async with running(config) as (app, again):
        await again.wait_for("send", 1, chat_id="c", timeout=30)
        assert again.texts(chat_id="c") == ["Here is the report on tea."]
        assert await jobs_in(app, JobState.DELIVERED) == [job]
    assert len(llm.requests) == 3  # one follow-up, not two
    assert "finished: # Research Report: tea" in tool_texts(llm.requests[2])[-1]


async def test_a_stdio_servers_task_is_reported_lost_after_a_restart(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    config = make_config(mcp={"servers": [everything()]})
    async with researching(config, llm, "It was lost; shall I start it again?") as (app, _):
        [job] = await jobs_in(app, JobState.RUNNING)
        await kept(app, job)  # the task runs in the server, a process that ends with the daemon
    async with running(config) as (app, again):
        await again.wait_for("send", 1, chat_id="c", timeout=30)
        assert again.texts(chat_id="c") == ["It was lost; shall I start it again?"]
    lost = tool_texts(llm.requests[2])[-1]
    assert "failed: MCP server everything was restarted since task" in lost
    assert "the task and its result are lost" in lost


async def test_without_the_servers_task_support_the_tool_is_left_out(tmp_path: Path) -> None:
    """The fake MCP server announces no tasks; its `slow_report` runs only as one."""
    code, heads, err, out = await tools_listing(tmp_path, server("fake", [sys.executable, FAKE]))
    assert code == 0, err
    assert "fake__lookup" in heads and "fake__slow_report" not in heads
    assert (
        "not offered: slow_report (mcp:fake): it runs only as an MCP task, and the server does "
        "not announce tasks for tools/call (its tasks.requests.tools.call capability)"
    ) in not_offered(out)


async def test_a_tasks_question_reaches_the_requester_and_the_answer_shapes_the_report(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    """`ambiguous`: at its third stage the task is input_required, and its question comes
    through tasks/result; the requester's answer goes back and the report names it."""
    config = make_config(mcp={"servers": [everything()]})
    topic = {"topic": "python", "ambiguous": True}
    async with researching(config, llm, "Here is the report.", **topic) as (app, channel):
        [asked] = await channel.wait_for("private", timeout=30)
        assert asked.chat_id == "u1" and "could have multiple interpretations" in asked.text
        snake = next(b.action for b in asked.buttons if b.label == "Python snake species")
        reply = await app.dispatcher.handle_action(Action("test", "u1", "u1", snake))
        assert reply.text == "Answered: Python snake species"
        await channel.wait_for("send", 2, chat_id="c", timeout=30)
    report = tool_texts(llm.requests[2])[-1]
    assert "# Research Report: python (snake)" in report


async def test_a_job_cancelled_on_purpose_cancels_its_task(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    config = make_config(mcp={"servers": [everything()]})
    async with researching(config, llm) as (app, _):
        [job] = await jobs_in(app, JobState.RUNNING)
        task_id = json.loads(await kept(app, job))["task"]
        await app.dispatcher.background.runner.cancel([job])  # as the console's Cancel does
        tool = app.dispatcher.background.registry.get(RESEARCH)
        assert isinstance(tool, McpTool)
        conn = tool.server.session
        assert conn is not None
        task = await conn.session.send_request(
            types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task_id)),
            types.GetTaskResult,
        )
        assert task.status == "cancelled"
    assert len(llm.requests) == 2  # no result to follow


async def test_a_task_tool_that_asks_starts_only_once_confirmed(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    """Without `trusted_tools` the tool (no readOnlyHint) asks first, as any call that acts."""
    config = make_config(mcp={"servers": [everything(trusted_tools=[])]})
    llm.script(tool_call(RESEARCH, {"topic": "tea"}), text(RUNNING), text("The report."))
    async with running(config) as (app, channel):
        await app.dispatcher.handle_inbound(channel.message("research tea", chat_id="c"))
        [shown] = await channel.wait_for("confirm", chat_id="c", timeout=30)
        assert shown.prompt is not None and await jobs_in(app, JobState.RUNNING) == []
        approved = await app.dispatcher.handle_press(
            Press("test", "c", "u1", shown.prompt.id, Choice.ONCE)
        )
        assert approved.status is DecisionStatus.APPROVED
        await channel.wait_for("send", 2, chat_id="c", timeout=30)
        assert channel.texts(chat_id="c") == [RUNNING, "The report."]


async def test_a_task_lost_with_its_http_server_is_reported_lost(
    make_config: Callable[..., Config], llm: FakeOpenAI, remote: HttpServer
) -> None:
    config = make_config(mcp={"servers": [over_http(remote)]})
    async with researching(config, llm, "It was lost.") as (app, channel):
        [job] = await jobs_in(app, JobState.RUNNING)
        await kept(app, job)
        await remote.kill()  # its tasks die with it
        await remote.start()
        await channel.wait_for("send", 2, chat_id="c", timeout=30)
        assert channel.texts(chat_id="c")[-1] == "It was lost."
    lost = tool_texts(llm.requests[2])[-1]
    assert "failed: MCP server everything no longer has the session of task" in lost
    assert "(it restarted): the task and its result are lost." in lost
