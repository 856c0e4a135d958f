"""Scheduled tasks and per-chat settings as a Telegram user meets them: the real
python-telegram-bot against the fake Bot API, the real App, the fake LLM over HTTP."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from bot.app import App
from bot.config import Config
from tests.fakes.clock import ManualClock
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.fakes.telegram_server import BOT_USERNAME, FakeTelegram

DM = 5
GROUP, OTHER_GROUP = -1001, -1002
ADMIN, MEMBER = 11, 12


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


@pytest.fixture
def config(make_config: Callable[..., Config], tg: FakeTelegram) -> Config:
    telegram = {
        "enabled": True,
        "token": tg.token,
        "api_base_url": tg.base_url,
        "allowed_users": ["*"],
        "poll_timeout_s": 5,
    }
    return make_config(
        telegram=telegram,
        llm={"models_allowed": ["fake-model", "big-model"]},
        tools={"builtins": ["schedule_task", "list_schedules", "cancel_schedule"]},
        schedules={"min_interval_s": 60},
    )


@asynccontextmanager
async def daemon(config: Config, clock: ManualClock | None = None) -> AsyncIterator[App]:
    async with App(config, clock=clock) as app:
        yield app


def to(chat: int, text: str | None = None) -> Callable[[dict[str, Any]], bool]:
    return lambda p: p.get("chat_id") == chat and (text is None or text in p.get("text", ""))


def system_of(body: dict[str, Any]) -> str:
    return body["messages"][0]["content"] if body["messages"][0]["role"] == "system" else ""


async def test_every_minute_in_a_dm_fires_survives_a_restart_and_stops_on_cancel(
    config: Config, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    clock = ManualClock()
    llm.script(
        tool_call("schedule_task", {"task": "Tell me the time", "every_minutes": 1}),
        text("Every minute it is."),
    )
    async with daemon(config, clock):
        tg.inject_message(DM, DM, "every minute, tell me the time")
        await tg.wait_for_call("sendMessage", to(DM, "Every minute it is."))
        llm.script(text("It is 12:00."))
        await clock.advance(60)
        await tg.wait_for_call("sendMessage", to(DM, "It is 12:00."))
    llm.script(text("It is 12:01."))
    async with daemon(config, clock):
        await clock.advance(60)
        await tg.wait_for_call("sendMessage", to(DM, "It is 12:01."))
        tg.inject_message(DM, DM, "/schedules")
        menu = await tg.wait_for_call("sendMessage", to(DM, "Scheduled tasks here"))
        assert "#1: Tell me the time" in menu.params["text"]
        [[button]] = menu.params["reply_markup"]["inline_keyboard"]
        assert button["text"] == "Cancel #1"
        message_id = max(m for (c, m) in tg.messages if c == DM)
        tg.inject_callback(DM, DM, message_id, button["callback_data"])
        edit = await tg.wait_for_call("editMessageText", to(DM, "Cancelled #1."))
    assert "No scheduled tasks here" in edit.params["text"]
    with sqlite3.connect(config.storage.resolved_path()) as db:
        assert db.execute("SELECT state FROM schedules").fetchall() == [("cancelled",)]
        assert db.execute("SELECT state FROM schedule_runs").fetchall() == [("done",), ("done",)]


async def test_settings_in_a_group_persona_and_model_for_that_group_only_admins_change(
    config: Config, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    tg.chat_admins[GROUP] = {ADMIN}
    mention = f"@{BOT_USERNAME} hi"
    config.telegram.private_replies = False  # the menu public, so a member can press it too
    async with daemon(config):
        tg.inject_message(GROUP, MEMBER, "/settings persona You are a pirate", chat_type="group")
        refused = await tg.wait_for_call("sendMessage", to(GROUP))
        assert refused.params["text"].startswith("Only this group's admins can change")
        tg.inject_message(GROUP, ADMIN, "/settings persona You are a pirate", chat_type="group")
        saved = await tg.wait_for_call("sendMessage", to(GROUP, "Saved."))
        assert "Persona: You are a pirate" in saved.params["text"]
        buttons = [b for [b] in saved.params["reply_markup"]["inline_keyboard"]]
        big = next(b for b in buttons if b["text"] == "Model: big-model")
        menu_id = max(m for (c, m) in tg.messages if c == GROUP)
        tg.inject_callback(GROUP, MEMBER, menu_id, big["callback_data"])  # not an admin
        await tg.wait_for_call("editMessageText", to(GROUP, "Only this group's admins"))
        tg.inject_callback(GROUP, ADMIN, menu_id, big["callback_data"])
        await tg.wait_for_call("editMessageText", to(GROUP, "Model: big-model"))
        tg.inject_message(GROUP, MEMBER, mention, chat_type="group")
        tg.inject_message(OTHER_GROUP, MEMBER, mention, chat_type="group")
        await tg.wait_for_call("sendMessage", to(GROUP, "echo:"))
        await tg.wait_for_call("sendMessage", to(OTHER_GROUP, "echo:"))
        tg.inject_message(GROUP, ADMIN, "/reset", chat_type="group")
        await tg.wait_for_call("sendMessage", to(GROUP, "Started a fresh conversation"))
    async with daemon(config):  # kept across a restart, and by /reset
        tg.inject_message(GROUP, MEMBER, mention, chat_type="group")
        await tg.wait_for_call("sendMessage", to(GROUP, "echo:"), count=2)
    *both, after_restart = llm.requests
    # the two groups' turns ran concurrently: tell them apart by what they were sent
    here, elsewhere = sorted(both, key=lambda r: "pirate" not in system_of(r))
    assert here["model"] == "big-model" and "\n\nYou are a pirate\n\n" in system_of(here)
    assert elsewhere["model"] == "fake-model" and "pirate" not in system_of(elsewhere)
    assert after_restart["model"] == "big-model" and "pirate" in system_of(after_restart)
    assert [c.params["user_id"] for c in tg.calls_of("getChatMember")] == [MEMBER, ADMIN] * 2


async def test_reply_mode_all_is_per_group_and_the_default_is_unchanged(
    config: Config, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    tg.chat_admins[GROUP] = {ADMIN}
    async with daemon(config):
        tg.inject_message(GROUP, ADMIN, "/settings mode all", chat_type="group")
        saved = await tg.wait_for_call("sendMessage", to(GROUP, "Saved."))
        assert "I answer: every message" in saved.params["text"]
        assert "privacy mode off" in saved.params["text"]
        tg.inject_message(OTHER_GROUP, MEMBER, "just chatting over here", chat_type="group")
        tg.inject_message(GROUP, MEMBER, "just chatting", chat_type="group")
        await tg.wait_for_call("sendMessage", to(GROUP, "echo: "))
        tg.inject_message(OTHER_GROUP, MEMBER, f"@{BOT_USERNAME} now you", chat_type="group")
        await tg.wait_for_call("sendMessage", to(OTHER_GROUP, "echo: "))
        tg.inject_message(GROUP, ADMIN, "/settings mode mentions", chat_type="group")
        await tg.wait_for_call("sendMessage", to(GROUP, "only when mentioned"))
        tg.inject_message(GROUP, MEMBER, "chatter again", chat_type="group")
        tg.inject_message(GROUP, MEMBER, f"@{BOT_USERNAME} and now?", chat_type="group")
        await tg.wait_for_call("sendMessage", to(GROUP, "echo: "), count=2)
    asked = [str(b["messages"][-1]["content"]) for b in llm.requests]
    assert len(asked) == 3
    assert "just chatting" in asked[0] and "now you" in asked[1] and "and now?" in asked[2]
