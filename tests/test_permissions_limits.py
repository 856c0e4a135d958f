"""Approvals people can live with ("Always in this chat", /permissions) and limits that protect
the owner's bill (messages per minute, tokens per day, /usage): through the real App."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from bot.app import App
from bot.config import Config
from engine import Action, Choice, Command, DecisionStatus, Press
from engine.chat import LimitSettings
from engine.chat._access._limits import today
from tests.fakes.openai_server import FakeOpenAI, echo, text, tool_call
from tests.fakes.recording_channel import RecordingChannel
from tools import tool

written: list[str] = []


@tool(destructive=True)
async def write_note(name: str) -> str:
    """Write a note file."""
    written.append(name)
    return f"wrote {name}"


@tool(destructive=True)
async def delete_file(name: str) -> str:
    """Delete a file for good."""
    written.append(f"deleted {name}")
    return "deleted"


@pytest.fixture(autouse=True)
def _clear() -> None:
    written.clear()


@asynccontextmanager
async def running(config: Config) -> AsyncIterator[tuple[App, RecordingChannel]]:
    channel = RecordingChannel()
    async with App(config, channels=[channel], extra_tools=(write_note, delete_file)) as app:
        app.dispatcher.settings.allowed_users["test"] = {"u1", "u2", "boss"}
        yield app, channel


def press(cid: str, user: str, choice: Choice, chat_id: str = "c1") -> Press:
    return Press("test", chat_id, user, cid, choice)


async def ask(app: App, ch: RecordingChannel, tool_name: str, n: int = 1, **kw: Any) -> Any:
    await app.dispatcher.handle_inbound(ch.message(f"please {tool_name}", **kw))
    shown = await ch.wait_for("confirm", n)
    assert shown[-1].prompt is not None
    return shown[-1].prompt


async def test_always_runs_without_asking_after_a_restart_until_revoked(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    config = make_config()
    llm.script(tool_call("write_note", {"name": "a"}), text("Wrote a."))
    async with running(config) as (app, ch):
        prompt = await ask(app, ch, "write_note")
        assert prompt.choices == (Choice.ONCE, Choice.ALWAYS, Choice.CANCEL)
        decision = await app.dispatcher.handle_press(press(prompt.id, "u1", Choice.ALWAYS))
        assert decision.status is DecisionStatus.APPROVED
        await ch.wait_for("send")
    llm.script(tool_call("write_note", {"name": "b"}), text("Wrote b."))
    async with running(config) as (app, ch):  # the grant survives the restart
        await app.dispatcher.handle_inbound(ch.message("another note"))
        await ch.wait_for("send")
        assert ch.texts("confirm") == [] and written == ["a", "b"]
        menu = await app.dispatcher.handle_command(ch.message("/permissions"), Command.PERMISSIONS)
        assert "write_note: always allowed by user-u1" in menu.text
        revoke = next(b for b in menu.buttons if b.label == "Revoke write_note")
        after = await app.dispatcher.handle_action(Action("test", "c1", "u2", revoke.action))
        assert "Revoked" in after.text and after.buttons == ()
        llm.script(tool_call("write_note", {"name": "c"}), text("Wrote c."))
        prompt = await ask(app, ch, "write_note")  # asks again
    assert written == ["a", "b"]


async def test_always_ask_tools_and_non_admins_in_groups_get_no_always(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    config = make_config(access={"admins": ["test:boss"]})
    llm.default = lambda body: (
        tool_call("delete_file", {"name": "x"})
        if "delete" in str(body["messages"][-1]["content"])
        else tool_call("write_note", {"name": "x"})
    )
    async with running(config) as (app, ch):
        prompt = await ask(app, ch, "delete it")  # an always_ask tool, in a DM
        assert Choice.ALWAYS not in prompt.choices
        # a forged "always" payload for it is refused like a button never shown
        forged = await app.dispatcher.handle_press(press(prompt.id, "u1", Choice.ALWAYS))
        assert forged.status is DecisionStatus.UNKNOWN
        await app.dispatcher.handle_command(ch.message("/stop"), Command.STOP)
        group = {"chat_id": "g1", "is_private": False}
        prompt = await ask(app, ch, "write it", 2, user_id="u2", **group)
        assert Choice.ALWAYS not in prompt.choices  # not an admin: once or not at all
        await app.dispatcher.handle_command(ch.message("/stop", chat_id="g1"), Command.STOP)
        prompt = await ask(app, ch, "write it", 3, user_id="boss", **group)
        assert Choice.ALWAYS in prompt.choices
    assert written == []


async def test_a_flood_is_stored_answered_once_and_costs_a_bounded_number_of_requests(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    llm.default = echo
    async with running(make_config()) as (app, ch):
        app.dispatcher.settings.limits = LimitSettings(messages_per_minute=5, window_s=1.0)
        for i in range(100):
            await app.dispatcher.handle_inbound(ch.message(f"spam {i}", user_id="u2"))
        await ch.wait_for("send", 2)  # the polite note and the first answer at least
        path = app.config.storage.resolved_path()

        def unanswered() -> int:
            with sqlite3.connect(path) as db:
                return db.execute("SELECT COUNT(*) FROM inbox WHERE state!='answered'").fetchone()[
                    0
                ]

        async with asyncio.timeout(10):
            while unanswered():  # the held ones are answered once the window passed
                await app.dispatcher.wait_idle("test", "c1")
                await asyncio.sleep(0.05)  # a poll of the store, not a synchronisation
    notes = [t for t in ch.texts() if "faster than I may answer" in t]
    assert len(notes) == 1
    assert len(llm.requests) <= 5 + 1  # five in the window, then one turn for the rest
    seen = " ".join(str(r["messages"]) for r in llm.requests)
    assert all(f"spam {i}'" in seen or f"spam {i}\\n" in seen for i in range(100))


async def test_a_user_past_the_daily_budget_is_told_when_it_resets_and_others_go_on(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    llm.default = echo
    async with running(make_config(limits={"tokens_per_day": 1000})) as (app, ch):
        await app.store.usage.add("test", "u1", today(), 900, 200, 3)
        await app.dispatcher.handle_inbound(ch.message("one more?", user_id="u1"))
        refused = await ch.wait_for("send")
        assert (
            "today's budget of 1,000 tokens" in refused[0].text and "00:00 UTC" in refused[0].text
        )
        assert llm.requests == []
        await app.dispatcher.handle_inbound(ch.message("hello", user_id="u2"))
        await ch.wait_for("send", 2)
        await app.dispatcher.wait_idle("test", "c1")  # the turn's usage is recorded at its end
        usage = await app.dispatcher.handle_command(
            ch.message("/usage", user_id="u2"), Command.USAGE
        )
    assert len(llm.requests) == 1 and ch.texts()[-1] == "echo: hello"
    assert usage.text.startswith("Today: ") and "1 turns" in usage.text
    assert "Top users" not in usage.text
