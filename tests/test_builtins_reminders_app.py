"""remind_me through the real daemon (App, store, dispatcher, fake LLM): the reminder arrives in
the chat it was asked in, also when it fell due while the daemon was down (late but once).
The daemon's clock is a ManualClock the tests move: nothing waits for real seconds."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import datetime

import pytest

from bot.app import App
from bot.config import Config
from tests.fakes.clock import ManualClock
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.fakes.recording_channel import RecordingChannel


@pytest.fixture
def config(make_config: Callable[..., Config]) -> Config:
    return make_config(tools={"builtins": ["remind_me", "current_time"]})


@asynccontextmanager
async def running(
    config: Config, clock: ManualClock
) -> AsyncIterator[tuple[App, RecordingChannel]]:
    channel = RecordingChannel()
    async with App(config, channels=[channel], clock=clock) as app:
        app.dispatcher.settings.allowed_users["test"] = {"u1", "u2"}
        yield app, channel


def whole_second_clock() -> ManualClock:
    """A ManualClock now, in whole seconds: a due time is stored to the microsecond, so moving
    the clock by a reminder's delay reaches it exactly."""
    return ManualClock(float(int(time.time())))


def stored_jobs(config: Config) -> list[tuple[str, str, str, str]]:
    with sqlite3.connect(config.storage.resolved_path()) as db:
        return db.execute("SELECT chat_id, tool, args, state FROM jobs").fetchall()


async def test_reminder_fires_in_the_chat_it_came_from(config: Config, llm: FakeOpenAI) -> None:
    clock = whole_second_clock()
    llm.script(tool_call("remind_me", {"text": "stretch", "in_seconds": 600}), text("Will do."))
    async with running(config, clock) as (app, ch):
        await app.dispatcher.handle_inbound(ch.message("remind me to stretch", chat_id="a"))
        await ch.wait_for("send", chat_id="a")
        await app.dispatcher.handle_inbound(ch.message("hello", chat_id="b"))
        await ch.wait_for("send", chat_id="b")
        assert ch.texts(chat_id="a") == ["Will do."]  # not before its time
        await clock.advance(600)
        reminder = await ch.wait_for("send", 2, chat_id="a")
        await app.dispatcher.wait_idle("test", "a")
    assert [s.text for s in reminder] == ["Will do.", "⏰ Reminder: stretch"]
    assert ch.texts(chat_id="b") == ["echo: hello"]
    # the model was told the job started, and later sees the reminder as tool data
    assert "Started in the background" in llm.requests[1]["messages"][-1]["content"]


async def test_reminder_due_while_down_fires_once_after_restart(
    config: Config, llm: FakeOpenAI
) -> None:
    clock = whole_second_clock()
    llm.script(tool_call("remind_me", {"text": "call mum", "in_seconds": 60}), text("Sure."))
    async with running(config, clock) as (app, ch):
        await app.dispatcher.handle_inbound(ch.message("remind me in a second", chat_id="a"))
        assert [s.text for s in await ch.wait_for("send", chat_id="a")] == ["Sure."]
    [(chat, tool, args, state)] = stored_jobs(config)
    assert (chat, tool, state) == ("a", "remind_me", "running")
    stored = json.loads(args)
    assert set(stored) == {"text", "at"}  # made absolute before it was stored
    due = datetime.fromisoformat(stored["at"])
    assert ch.texts() == ["Sure."]  # the daemon stopped before the reminder was due

    assert due.timestamp() == pytest.approx(clock.now() + 60, abs=0.001)  # by the daemon's clock

    await clock.advance(90)  # down while it fell due (30 s ago: not yet "sent late")
    async with running(config, clock) as (app, ch2):
        sent = await ch2.wait_for("send", chat_id="a")
        await app.dispatcher.wait_idle("test", "a")
    assert [s.text for s in sent] == ["⏰ Reminder: call mum"]
    assert ch2.texts() == ["⏰ Reminder: call mum"]
    [(_, _, _, state)] = stored_jobs(config)
    assert state != "running"  # settled: nothing is left to resume

    async with running(config, clock) as (app, ch3):  # once: not again at the next start
        await app.dispatcher.wait_idle("test", "a")
    assert ch3.texts() == []


async def test_reminder_not_yet_due_waits_again_after_restart(
    config: Config, llm: FakeOpenAI
) -> None:
    clock = whole_second_clock()
    llm.script(tool_call("remind_me", {"text": "tea", "in_seconds": 300}), text("Okay."))
    async with running(config, clock) as (app, ch):
        await app.dispatcher.handle_inbound(ch.message("tea in a bit", chat_id="k"))
        await ch.wait_for("send", chat_id="k")
    await clock.advance(100)
    async with running(config, clock) as (app, ch2):
        await app.dispatcher.wait_idle("test", "k")
        assert ch2.texts() == []  # resumed, still waiting for its time
        await clock.advance(200)
        sent = await ch2.wait_for("send", chat_id="k", timeout=5)
    assert sent[0].text == "⏰ Reminder: tea"
