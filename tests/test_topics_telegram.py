"""Telegram forum topics (issue 33) end to end: the real daemon and python-telegram-bot against
the fake Bot API, which has topics as Telegram defines them. Each topic is a conversation of its
own; everything the bot sends for one (answers, typing, confirmations and their edits, background
follow-ups, command replies) carries its message_thread_id; General and chats without topics are
as before. Synchronisation is on recorded calls, never on sleeps."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from typing import Any

import pytest

from bot.app import App
from bot.config import Config
from tests.fakes.clock import ManualClock
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.fakes.telegram_server import BOT_USERNAME, FakeTelegram
from tests.test_telegram import daemon, deleted, jobs_gate, telegram_config

FORUM = -100777
DM = 1001


@pytest.fixture
async def tg():  # type: ignore[no-untyped-def]
    async with FakeTelegram() as server:
        yield server


@pytest.fixture
def config(make_config: Callable[..., Config], tg: FakeTelegram) -> Callable[..., Config]:
    deleted.clear()
    jobs_gate["job"] = asyncio.Event()
    return functools.partial(telegram_config, make_config, tg)


def in_topic(chat: int, topic: int | None) -> Callable[[dict[str, Any]], bool]:
    return lambda p: p.get("chat_id") == chat and p.get("message_thread_id") == topic


def user_texts(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "user"]


async def test_two_topics_hold_two_conversations_and_answers_land_in_them(config, tg, llm) -> None:
    ideas, bugs = tg.open_topic(FORUM, "Ideas"), tg.open_topic(FORUM, "Bugs")
    async with daemon(config(group_mode="all")):
        tg.inject_message(FORUM, 7, "my name is Ann", chat_type="supergroup", topic=ideas)
        await tg.wait_for_call("sendMessage", in_topic(FORUM, ideas))
        tg.inject_message(FORUM, 8, "what is my name?", chat_type="supergroup", topic=bugs)
        await tg.wait_for_call("sendMessage", in_topic(FORUM, bugs))
        tg.inject_message(FORUM, 9, "in General", chat_type="supergroup")
        await tg.wait_for_call("sendMessage", in_topic(FORUM, None))
        tg.inject_message(FORUM, 7, "and again", chat_type="supergroup", topic=ideas)
        await tg.wait_for_call("sendMessage", in_topic(FORUM, ideas), count=2)
    assert user_texts(llm.requests[1]) == ["[User8] what is my name?"]  # not Ideas' history
    assert user_texts(llm.requests[2]) == ["[User9] in General"]
    assert user_texts(llm.requests[3]) == ["[User7] my name is Ann", "[User7] and again"]
    assert tg.topic_texts(FORUM, ideas) == [
        "echo: [User7] my name is Ann",
        "echo: [User7] and again",
    ]
    assert tg.topic_texts(FORUM, bugs) == ["echo: [User8] what is my name?"]
    assert tg.topic_texts(FORUM, None) == ["echo: [User9] in General"]


async def test_mentions_in_a_topic_the_bot_did_not_open_are_needed(config, tg, llm) -> None:
    """The topic's opening message is every message's reply_to_message: that is no reply to
    the bot, even when the bot opened the topic, so chatter in a topic stays unanswered."""
    topic = tg.open_topic(FORUM, "Chat")
    tg.sent_by_users[(FORUM, topic)]["from"] = {"id": 7000000001, "is_bot": True, "first_name": "R"}
    async with daemon(config()):
        tg.inject_message(FORUM, 7, "chatter", chat_type="supergroup", topic=topic)
        tg.inject_message(FORUM, 7, f"@{BOT_USERNAME} hi", chat_type="supergroup", topic=topic)
        await tg.wait_for_call("sendMessage", in_topic(FORUM, topic))
    assert [user_texts(r) for r in llm.requests] == [[f"[User7] @{BOT_USERNAME} hi"]]


async def test_typing_commands_and_private_chat_topics(config, tg, llm) -> None:
    topic = tg.open_topic(DM, "Trip", chat_type="private")
    async with daemon(config()):
        tg.inject_message(DM, DM, "/help", topic=topic)
        await tg.wait_for_call("sendMessage", in_topic(DM, topic))
        tg.inject_message(DM, DM, "plan it", topic=topic)
        await tg.wait_for_call("sendMessage", in_topic(DM, topic), count=2)
        tg.inject_message(DM, DM, "outside")
        await tg.wait_for_call("sendMessage", in_topic(DM, None))
    assert tg.topic_texts(DM, topic)[1] == "echo: plan it"
    assert tg.topic_texts(DM, None) == ["echo: outside"]
    assert all(c.params.get("message_thread_id") == topic for c in tg.calls_of("sendChatAction"))


async def test_a_confirmation_and_a_background_job_stay_in_their_topic(
    config, tg, llm: FakeOpenAI
) -> None:
    ops, other = tg.open_topic(FORUM, "Ops"), tg.open_topic(FORUM, "Other")
    llm.script(tool_call("delete_file", {"name": "a.txt"}))
    async with daemon(config(group_mode="all")):
        tg.inject_message(FORUM, 7, "delete a.txt", chat_type="supergroup", topic=ops)
        prompt = await tg.wait_for_call("sendMessage", lambda p: "reply_markup" in p)
        assert prompt.params["message_thread_id"] == ops  # the requester's alone, in the topic
        assert prompt.params["ephemeral_message_parameters"] == {"receiver_user_id": 7}
        # A message in another topic moves only that conversation on: the prompt stays.
        tg.inject_message(FORUM, 8, "unrelated", chat_type="supergroup", topic=other)
        await tg.wait_for_call("sendMessage", in_topic(FORUM, other))
        ((_, _, prompt_id),) = [k for k, m in tg.ephemerals.items() if "reply_markup" in m]
        assert tg.ephemerals[(FORUM, 7, prompt_id)]["message_thread_id"] == ops
        llm.script(text("Deleted a.txt."))
        data = prompt.params["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
        tg.press_ephemeral(FORUM, 7, prompt_id, data)
        await tg.wait_for_call("sendMessage", lambda p: p.get("text") == "Deleted a.txt.")
        await tg.wait_for_call("editEphemeralMessageText", lambda p: "Done" in p["text"])
        llm.script(tool_call("slow_report", {"topic": "disks"}), text("Started."))
        tg.inject_message(FORUM, 7, "report please", chat_type="supergroup", topic=ops)
        await tg.wait_for_call("sendMessage", lambda p: p.get("text") == "Started.")
        llm.script(text("The report: all good."))
        jobs_gate["job"].set()
        await tg.wait_for_call("sendMessage", lambda p: p.get("text") == "The report: all good.")
    assert deleted == ["a.txt"]
    assert tg.topic_texts(FORUM, ops)[-3:] == [
        "Deleted a.txt.",
        "Started.",
        "The report: all good.",
    ]
    assert tg.topic_texts(FORUM, other) == ["echo: [User8] unrelated"]
    assert tg.topic_texts(FORUM, None) == []


async def test_the_fake_refuses_a_topic_where_there_are_none(tg) -> None:
    from telegram import Bot
    from telegram.error import BadRequest

    async with Bot(tg.token, base_url=tg.base_url) as bot:
        with pytest.raises(BadRequest, match="thread not found"):
            await bot.send_message(DM, "x", message_thread_id=5)
        topic = tg.open_topic(FORUM, "T")
        with pytest.raises(BadRequest, match="thread not found"):
            await bot.send_message(FORUM, "x", message_thread_id=topic + 100)
        sent = await bot.send_message(FORUM, "x", message_thread_id=topic)
    assert sent.is_topic_message and sent.message_thread_id == topic and sent.chat.is_forum


async def test_a_reminder_asked_in_a_topic_fires_in_that_topic(
    make_config: Callable[..., Config], tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    clock = ManualClock(float(int(time.time())))
    topic = tg.open_topic(FORUM, "Health")
    cfg = telegram_config(make_config, tg, group_mode="all")
    cfg.tools.builtins = ["remind_me"]
    llm.script(tool_call("remind_me", {"text": "stretch", "in_seconds": 600}), text("Will do."))
    async with App(cfg, clock=clock):
        tg.inject_message(FORUM, 7, "remind me to stretch", chat_type="supergroup", topic=topic)
        await tg.wait_for_call("sendMessage", in_topic(FORUM, topic))
        await clock.advance(600)
        await tg.wait_for_call("sendMessage", in_topic(FORUM, topic), count=2)
    assert tg.topic_texts(FORUM, topic) == ["Will do.", "⏰ Reminder: stretch"]
    assert tg.topic_texts(FORUM, None) == []
