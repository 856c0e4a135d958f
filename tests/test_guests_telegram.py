"""Guests (issue 44; Bot API 10.0 Guest Mode): a mention of the bot in a chat it is not a member
of is answered there, within the access rules, as the person who asked, with no history but the
mention itself. The real App and python-telegram-bot against the fake Bot API's guest side
(tests/fakes/telegram_guests.py)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

import pytest

from bot.app import App
from bot.config import Config
from tests.fakes.openai_server import FakeOpenAI, echo, text, tool_call
from tests.fakes.telegram_server import BOT_USERNAME, FakeTelegram
from tests.test_private_replies_telegram import drop_table, dropped, tg

__all__ = ["tg"]  # the fixture

ELSEWHERE = -100900  # a group the bot is not a member of
ALICE, STRANGER = 7, 77


@pytest.fixture
def config(make_config: Callable[..., Config], tg: FakeTelegram) -> Callable[..., Config]:
    def make(**llm: Any) -> Config:
        telegram = {
            "enabled": True,
            "token": tg.token,
            "api_base_url": tg.base_url,
            "allowed_users": [str(ALICE)],
            "poll_timeout_s": 5,
        }
        access = {"admins": ["telegram:1"]}
        return make_config(telegram=telegram, access=access, llm=llm)

    return make


def user_messages(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "user"]


async def test_a_guest_mention_is_answered_where_it_came_from_with_no_history(
    config, tg, llm: FakeOpenAI
) -> None:
    llm.default = echo
    cfg = config()
    async with App(cfg):
        tg.inject_guest_message(ELSEWHERE, ALICE, f"@{BOT_USERNAME} what is 2+2?")
        await tg.wait_for_call("answerGuestQuery")
        tg.inject_guest_message(ELSEWHERE, ALICE, f"@{BOT_USERNAME} and 3+3?")
        await tg.wait_for_call("answerGuestQuery", count=2)
    first, second = (user_messages(r) for r in llm.requests)
    assert first == [f"[User7] @{BOT_USERNAME} what is 2+2?"]
    assert second == [f"[User7] @{BOT_USERNAME} and 3+3?"]  # nothing of the first
    assert list(tg.guest_answers.values()) == [f"echo: {first[0]}", f"echo: {second[0]}"]
    assert [c.status for c in tg.calls_of("answerGuestQuery")] == [200, 200]
    assert not [c for c in tg.calls if c.params.get("chat_id") == ELSEWHERE]  # not a member
    with sqlite3.connect(cfg.storage.resolved_path()) as db:  # counted once the App stopped
        usage = db.execute("SELECT channel, user_id, turns FROM usage").fetchall()
    assert usage == [("telegram", str(ALICE), 2)]  # the person who asked pays


async def test_a_stranger_s_guest_mention_is_not_sent_to_the_model(config, tg, llm) -> None:
    llm.default = echo
    async with App(config()):
        tg.inject_guest_message(ELSEWHERE, STRANGER, f"@{BOT_USERNAME} hello")
        await tg.wait_for_call("answerGuestQuery")
    assert llm.requests == []
    (told,) = tg.guest_answers.values()
    assert "asked the owner" in told  # the refusal (pairing), where they asked


async def test_a_streamed_guest_answer_grows_in_its_inline_message(config, tg, llm) -> None:
    llm.default = echo
    llm.stream_chunk_chars, llm.stream_chunk_delay_s = 4, 0.02
    async with App(config(stream=True)):
        tg.inject_guest_message(ELSEWHERE, ALICE, f"@{BOT_USERNAME} tell me a long story please")
        await tg.wait_for_call("answerGuestQuery")
        await tg.wait_for_call(
            "editMessageText",
            lambda p: "story please" in p.get("text", "") and "inline_message_id" in p,
        )
    (shown,) = tg.guest_answers.values()
    assert shown.endswith("tell me a long story please")


async def test_a_guest_confirms_a_destructive_action_on_the_answer_and_it_runs_once(
    config, tg, llm
) -> None:
    dropped.clear()
    llm.script(tool_call("drop_table", {"name": "users"}), text("Dropped the users table."))
    async with App(config(), extra_tools=(drop_table,)):
        tg.inject_guest_message(ELSEWHERE, ALICE, f"@{BOT_USERNAME} drop the users table")
        await tg.wait_for_call("answerGuestQuery")
        ((query, keyboard),) = tg.guest_buttons.items()
        allow = keyboard["inline_keyboard"][0][0]["callback_data"]
        tg.press_guest_answer(query, STRANGER, allow)  # not hers: refused
        await tg.wait_for_call("answerCallbackQuery")
        tg.press_guest_answer(query, ALICE, allow)
        tg.press_guest_answer(query, ALICE, allow)
        await tg.wait_for_call(
            "editMessageText", lambda p: p.get("text") == "Dropped the users table."
        )
        await tg.wait_for_call("answerCallbackQuery", count=3)
    assert dropped == ["users"]
    assert tg.guest_answers[query] == "Dropped the users table."  # the answer replaced it
    assert query not in tg.guest_buttons
    said = [c.params.get("text", "") for c in tg.calls_of("answerCallbackQuery")]
    assert said[0].startswith("Only ") and sorted(said[1:]) == ["Already decided.", "Confirmed."]
