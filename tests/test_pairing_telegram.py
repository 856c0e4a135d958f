"""Pairing as people meet it on Telegram: the real python-telegram-bot against the fake Bot API,
the real App, the fake LLM over HTTP. The owner's Allow is pressed after a restart: the buttons
name the request, not anything the daemon keeps in memory."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from bot.app import App
from bot.config import Config
from tests.fakes.openai_server import FakeOpenAI, echo
from tests.fakes.telegram_server import FakeTelegram

OWNER, STRANGER = 11, 77


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


def to(chat: int, text: str | None = None) -> Callable[[dict], bool]:  # type: ignore[type-arg]
    return lambda p: p.get("chat_id") == chat and (text is None or text in p.get("text", ""))


async def test_a_stranger_asks_the_owner_allows_after_a_restart_and_the_next_message_is_answered(
    make_config: Callable[..., Config], tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    llm.default = echo
    telegram = {
        "enabled": True,
        "token": tg.token,
        "api_base_url": tg.base_url,
        "allowed_users": [],
        "poll_timeout_s": 5,
    }
    config = make_config(telegram=telegram, access={"admins": [f"telegram:{OWNER}"]})
    async with App(config):
        tg.inject_message(STRANGER, STRANGER, "/start", username="newfriend", first_name="Nia")
        asked = await tg.wait_for_call("sendMessage", to(STRANGER, "asked the owner"))
        assert "Your user id is 77" in asked.params["text"]
        ask = await tg.wait_for_call("sendMessage", to(OWNER, "asks to use the bot"))
        assert "Nia (@newfriend), telegram user 77" in ask.params["text"]
        buttons = [b for [b] in ask.params["reply_markup"]["inline_keyboard"]]
        assert [b["text"] for b in buttons] == ["Allow", "Deny"]
        tg.inject_message(STRANGER, STRANGER, "hello?")  # waiting: no second answer
        tg.inject_message(STRANGER, STRANGER, "/start")
        await tg.wait_for_call("sendMessage", to(STRANGER, "is waiting for the owner"))
    assert llm.requests == []
    async with App(config):  # a restart between the ask and the answer
        owner_message = max(m for (c, m) in tg.messages if c == OWNER)
        tg.inject_callback(OWNER, OWNER, owner_message, buttons[0]["callback_data"])
        await tg.wait_for_call("editMessageText", to(OWNER, "Allowed: Nia (@newfriend)"))
        await tg.wait_for_call("sendMessage", to(STRANGER, "let you in"))
        tg.inject_message(STRANGER, STRANGER, "now?")
        await tg.wait_for_call("sendMessage", to(STRANGER, "echo: now?"))
    assert len([c for c in tg.calls_of("sendMessage") if c.params["chat_id"] == OWNER]) == 1
