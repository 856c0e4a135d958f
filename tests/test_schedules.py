"""Scheduled tasks through the real daemon (App, store, dispatcher, fake LLM over HTTP), with a
clock the tests move: created by the tool, run at their time as full turns in their own chat,
kept across restarts, caught up once (or reported skipped) after downtime, failures reported,
cancelled from /schedules."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from bot.app import App
from bot.config import Config
from engine import Action, Command
from tests.fakes.clock import ManualClock
from tests.fakes.openai_server import FakeOpenAI, error, hold, text, tool_call, tool_calls
from tests.fakes.recording_channel import RecordingChannel
from tools import tool

TOOLS = ["schedule_task", "list_schedules", "cancel_schedule", "current_time"]
EVERY_MINUTE = {"task": "Tell me the time", "every_minutes": 1}
written: list[str] = []


@tool(destructive=True)
async def write_note(name: str) -> str:
    """Write a note file."""
    written.append(name)
    return f"wrote {name}"


@pytest.fixture
def config(make_config: Callable[..., Config]) -> Config:
    return make_config(tools={"builtins": TOOLS}, schedules={"min_interval_s": 60})


@asynccontextmanager
async def running(
    config: Config, clock: ManualClock
) -> AsyncIterator[tuple[App, RecordingChannel]]:
    channel = RecordingChannel()
    async with App(config, channels=[channel], clock=clock, extra_tools=(write_note,)) as app:
        app.dispatcher.settings.allowed_users["test"] = {"u1", "u2"}
        yield app, channel


def scheduled(llm: FakeOpenAI) -> list[dict[str, Any]]:
    """The model requests of scheduled runs (their last user message is the task)."""
    found = []
    for body in llm.requests:
        users = [m for m in body["messages"] if m["role"] == "user"]
        if users and "[Scheduled task #" in str(users[-1]["content"]):
            found.append(body)
    return found


def runs(config: Config) -> list[tuple[int, str, int]]:
    with sqlite3.connect(config.storage.resolved_path()) as db:
        return db.execute(
            "SELECT schedule_id, state, missed FROM schedule_runs ORDER BY due"
        ).fetchall()


async def create(
    app: App, ch: RecordingChannel, llm: FakeOpenAI, chat: str = "a", **kw: Any
) -> None:
    """Ask for a schedule in `chat`; the model calls schedule_task, then confirms."""
    llm.script(tool_call("schedule_task", kw or EVERY_MINUTE), text("Scheduled."))
    before = len(ch.texts(chat_id=chat))
    await app.dispatcher.handle_inbound(ch.message("every minute, tell me the time", chat_id=chat))
    await ch.wait_for("send", before + 1, chat_id=chat)
    await app.dispatcher.wait_idle("test", chat)


async def test_a_schedule_fires_at_its_time_in_its_chat_as_a_full_turn(
    config: Config, llm: FakeOpenAI
) -> None:
    clock = ManualClock()
    async with running(config, clock) as (app, ch):
        await create(app, ch, llm, chat="a")
        assert "Scheduled task #1: Every 1 minute" in llm.requests[1]["messages"][-1]["content"]
        await app.dispatcher.handle_inbound(ch.message("hello", chat_id="b"))
        await ch.wait_for("send", chat_id="b")
        assert scheduled(llm) == []  # not before its time
        llm.script(tool_call("current_time", {}), text("It is noon."))
        await clock.advance(60)
        sent = await ch.wait_for("send", 2, chat_id="a")
        await app.dispatcher.wait_idle("test", "a")
    assert [s.text for s in sent] == ["Scheduled.", "It is noon."]
    assert ch.texts(chat_id="b") == ["echo: hello"]
    first, second = scheduled(llm)
    assert first["messages"][-1]["content"].endswith("Tell me the time")
    assert second["messages"][-1]["role"] == "tool"  # the run used a tool, then answered
    assert runs(config) == [(1, "done", 0)]


async def test_a_schedule_survives_a_restart(config: Config, llm: FakeOpenAI) -> None:
    clock = ManualClock()
    async with running(config, clock) as (app, ch):
        await create(app, ch, llm)
    llm.script(text("12:01"))
    async with running(config, clock) as (app, ch):
        await clock.advance(60)
        sent = await ch.wait_for("send", chat_id="a")
        await app.dispatcher.wait_idle("test", "a")
    assert [s.text for s in sent] == ["12:01"]
    assert len(scheduled(llm)) == 1


async def test_a_run_missed_while_down_is_caught_up_once_within_the_grace(
    config: Config, llm: FakeOpenAI
) -> None:
    clock = ManualClock()
    async with running(config, clock) as (app, ch):
        await create(app, ch, llm)
    await clock.advance(30 * 60 + 30)  # down for half an hour: 30 due times passed
    llm.script(text("Caught up."))
    async with running(config, clock) as (app, ch):
        sent = await ch.wait_for("send", 2, chat_id="a")
        await app.dispatcher.wait_idle("test", "a")
    notice, answer = (s.text for s in sent)
    assert "while I was offline (29 earlier runs were missed); running it now" in notice
    assert answer == "Caught up."
    assert len(scheduled(llm)) == 1 and runs(config) == [(1, "done", 29)]
    async with running(config, clock) as (app, ch):  # once: a restart does not run it again
        await app.dispatcher.wait_idle("test", "a")
    assert ch.texts() == [] and len(scheduled(llm)) == 1


async def test_a_run_missed_past_the_grace_is_reported_skipped_not_run(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    config = make_config(
        tools={"builtins": TOOLS}, schedules={"min_interval_s": 60, "catch_up_s": 600}
    )
    clock = ManualClock()
    async with running(config, clock) as (app, ch):
        await create(app, ch, llm, task="Report", every_minutes=120)
    await clock.advance(150 * 60)  # down past its time: due 30 minutes ago, the grace is 10
    async with running(config, clock) as (app, ch):
        [notice] = await ch.wait_for("send", chat_id="a")
        await app.dispatcher.wait_idle("test", "a")
        llm.script(text("On time again."))
        await clock.advance(90 * 60)  # the next due time still comes
        answer = await ch.wait_for("send", 2, chat_id="a")
    assert "⏭ Scheduled task #1 (“Report”) was skipped: I was offline for its run due at" in (
        notice.text
    )
    assert "too long ago to run it now. Next run:" in notice.text
    assert answer[-1].text == "On time again."
    assert [(state, missed) for _, state, missed in runs(config)] == [("skipped", 0), ("done", 0)]


async def test_a_failing_run_tells_the_chat_and_the_next_one_runs(
    config: Config, llm: FakeOpenAI
) -> None:
    clock = ManualClock()
    async with running(config, clock) as (app, ch):
        await create(app, ch, llm)
        llm.script(error(500, "model exploded"))
        await clock.advance(60)
        _, failed = await ch.wait_for("send", 2, chat_id="a")
        await app.dispatcher.wait_idle("test", "a")
        llm.script(text("Working again."))
        await clock.advance(60)
        recovered = await ch.wait_for("send", 3, chat_id="a")
    assert failed.text.startswith("⚠️ Scheduled task #1 (“Tell me the time”) failed: the language")
    assert "could not be reached. Next run:" in failed.text and "exploded" not in failed.text
    assert recovered[-1].text == "Working again."
    assert [state for _, state, _ in runs(config)] == ["failed", "done"]


async def test_cancel_on_schedules_stops_it(config: Config, llm: FakeOpenAI) -> None:
    clock = ManualClock()
    async with running(config, clock) as (app, ch):
        two = tool_calls(
            [
                ("schedule_task", {"task": "First task", "every_minutes": 1}),
                ("schedule_task", {"task": "Second task", "every_minutes": 1}),
            ]
        )
        llm.script(two, text("Both scheduled."))
        await app.dispatcher.handle_inbound(ch.message("two schedules", chat_id="a"))
        await ch.wait_for("send", chat_id="a")
        menu = await app.dispatcher.handle_command(
            ch.message("/schedules", chat_id="a"), Command.SCHEDULES
        )
        assert "#1: First task" in menu.text and "#2: Second task" in menu.text
        assert [b.label for b in menu.buttons] == ["Cancel #1", "Cancel #2"]
        press = Action("test", "a", "u2", menu.buttons[0].action, is_private=True)
        after = await app.dispatcher.handle_action(press)
        assert after.text.startswith("Cancelled #1.") and "First task" not in after.text
        assert [b.label for b in after.buttons] == ["Cancel #2"]
        llm.script(text("Second ran."))
        await clock.advance(60)  # both were due now: only the second runs
        sent = await ch.wait_for("send", 2, chat_id="a")
        await app.dispatcher.wait_idle("test", "a")
        again = await app.dispatcher.handle_action(press)
    assert sent[-1].text == "Second ran."
    assert [b["messages"][-1]["content"][-11:] for b in scheduled(llm)] == ["Second task"]
    assert again.text.startswith("Already cancelled.")


async def test_the_time_zone_is_asked_once_and_limits_are_explained(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    config = make_config(tools={"builtins": TOOLS})  # at most every 5 minutes (the default)
    cron = {"task": "Weather", "cron": "0 8 * * 1-5"}
    llm.script(
        tool_call("schedule_task", cron),  # no time zone known yet: the model must ask
        text("Where are you?"),
        tool_call("schedule_task", {**cron, "timezone": "Europe/Paris"}),
        text("Done."),
        tool_call("schedule_task", {"task": "Later", "at": "18:30", "weekdays": ["sat"]}),
        tool_call("schedule_task", {"task": "Too often", "cron": "*/1 * * * *"}),
        text("Ok."),
    )
    async with running(config, ManualClock()) as (app, ch):
        for n, question in enumerate(("weather on weekdays", "Paris", "and saturdays"), 1):
            await app.dispatcher.handle_inbound(ch.message(question))
            await ch.wait_for("send", n)
    results = [
        m["content"] for body in llm.requests for m in body["messages"][-1:] if m["role"] == "tool"
    ]
    assert "time zone is not known yet. Ask the user" in results[0]
    assert "Scheduled task #1: At 08:00 on Monday through Friday (Europe/Paris)" in results[1]
    assert "CET" in results[1] or "CEST" in results[1]
    assert "Scheduled task #2: At 18:30 on Saturday (Europe/Paris)" in results[2]  # remembered
    assert (
        "would run every 1 minute; the shortest interval allowed here is 5 minutes" in (results[3])
    )


async def test_a_destructive_tool_in_a_run_asks_the_user_who_scheduled_it(
    config: Config, llm: FakeOpenAI
) -> None:
    clock = ManualClock()
    written.clear()
    async with running(config, clock) as (app, ch):
        llm.script(tool_call("schedule_task", EVERY_MINUTE), text("Scheduled."))
        await app.dispatcher.handle_inbound(
            ch.message("schedule it", chat_id="g", is_private=False)
        )
        await ch.wait_for("send", chat_id="g")
        llm.script(tool_call("write_note", {"name": "log"}))
        await clock.advance(60)
        [prompt] = await ch.wait_for("confirm", chat_id="g")
    assert prompt.prompt is not None
    assert (prompt.prompt.user_id, prompt.prompt.user_name) == ("u1", "user-u1")
    assert written == []  # nothing runs before u1 answers
    assert scheduled(llm)[0]["messages"][-1]["content"].startswith("[user-u1]")


async def test_a_run_cut_off_by_a_restart_is_reported_and_not_run_again(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    config = make_config(
        tools={"builtins": TOOLS}, schedules={"min_interval_s": 60}, engine={"shutdown_grace_s": 0}
    )
    clock = ManualClock()
    reached = asyncio.Event()
    async with running(config, clock) as (app, ch):
        await create(app, ch, llm)
        llm.script(hold(asyncio.Event(), text("never"), started=reached))
        await clock.advance(60)
        await reached.wait()  # the run's model request is in flight when the daemon stops
    async with running(config, clock) as (app, ch):
        [notice] = await ch.wait_for("send", chat_id="a")
        await app.dispatcher.wait_idle("test", "a")
    assert "⚠️ Scheduled task #1 (“Tell me the time”) was cut off by a restart" in notice.text
    assert runs(config) == [(1, "interrupted", 0)]


async def test_a_run_moves_the_conversation_on_like_a_message(
    config: Config, llm: FakeOpenAI
) -> None:
    clock = ManualClock()
    written.clear()
    async with running(config, clock) as (app, ch):
        await create(app, ch, llm)
        llm.script(tool_call("write_note", {"name": "x"}))
        await app.dispatcher.handle_inbound(ch.message("write a note", chat_id="a"))
        await ch.wait_for("confirm", chat_id="a")
        llm.script(text("It is noon."))
        await clock.advance(60)  # the prompt is left unanswered when the task runs
        [resolved] = await ch.wait_for("resolve", chat_id="a")
        assert "ancel" in resolved.text
        sent = await ch.wait_for("send", 2, chat_id="a")
    assert sent[-1].text == "It is noon." and written == []
    tool_result = scheduled(llm)[0]["messages"][-3]  # then a placeholder answer, then the run
    assert tool_result["role"] == "tool" and "scheduled task ran" in tool_result["content"]
