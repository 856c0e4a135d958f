"""Reply context (issue 33): the message a user replied to goes to the model with theirs, marked
as a quote with its author's name, bounded by [engine] max_quote_chars, and only in the turn that
answers it. The store keeps it on both backends (tests/test_store_contract.py); Telegram end to
end here, through python-telegram-bot and the fake Bot API; Discord's side is in
tests/test_threads_discord.py."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest

from bot.config import Config
from engine import MediaKind, Message, Quote, Role, Text
from engine.chat._intake._quotes import quoted
from engine.context import for_model
from tests.fakes.openai_server import FakeOpenAI, text
from tests.fakes.telegram_server import BOT_USERNAME, FakeTelegram
from tests.test_telegram import daemon, telegram_config

DM = 1001
GROUP = -100600


def test_a_quote_is_marked_named_and_bounded() -> None:
    block = quoted(
        Quote("Alice  Smith", "line one\n\nline two " + "x" * 50, (MediaKind.IMAGE,)), 30
    )
    assert block is not None
    lines = block.splitlines()
    assert lines[0] == "[The user replies to a message from Alice Smith:]"
    assert lines[1:3] == ["> line one", ">"]
    assert lines[3].endswith(" […]") and len(lines[3]) <= len("> ") + 30 + len(" […]")
    assert lines[4:] == ["> [a picture]", "[End of the quoted message]"]
    assert "your own earlier message" in (quoted(Quote("Relay", "hi", by_bot=True), 10) or "")
    assert quoted(Quote("A", "hi"), 0) is None and quoted(None, 100) is None
    assert "without text" in (quoted(Quote("A", ""), 10) or "")


def test_the_quote_is_shown_only_in_the_turn_that_answers_it() -> None:
    asked = Message(Role.USER, [Text("what does this mean?")], "Bob", "[quote A]")
    history = [asked, Message.assistant("It means yes.")]
    assert for_model([*history])[0].parts == [Text("[Bob] what does this mean?")]  # answered
    now = for_model([*history, Message(Role.USER, [Text("and this?")], None, "[quote B]")])
    assert now[-1].parts == [Text("[quote B]\n\nand this?")]
    assert now[0].parts == [Text("[Bob] what does this mean?")]


# -- Telegram ------------------------------------------------------------------------------------


@pytest.fixture
async def tg():  # type: ignore[no-untyped-def]
    async with FakeTelegram() as server:
        yield server


@pytest.fixture
def config(make_config: Callable[..., Config], tg: FakeTelegram) -> Callable[..., Config]:
    return functools.partial(telegram_config, make_config, tg)


def user_texts(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "user"]


async def test_telegram_replies_carry_the_quoted_message_once(config, tg, llm: FakeOpenAI) -> None:
    llm.script(text("Pasta at 8."))
    async with daemon(config(group_mode="all")):
        said = tg.inject_message(
            GROUP, 8, "dinner plans?", chat_type="supergroup", first_name="Carol"
        )
        await tg.wait_for_call("sendMessage", lambda p: p["text"] == "Pasta at 8.")
        tg.inject_message(
            GROUP,
            7,
            "what does she mean?",
            chat_type="supergroup",
            reply_to_message=said["message"]["message_id"],
        )
        await tg.wait_for_call("sendMessage", count=2)
        bot_msg = max(m for (c, m) in tg.messages if c == GROUP)
        tg.inject_message(
            GROUP,
            7,
            "and this bit?",
            chat_type="supergroup",
            reply_to_message=bot_msg,
            quote="echo",
        )
        await tg.wait_for_call("sendMessage", count=3)
        tg.inject_message(GROUP, 7, "thanks", chat_type="supergroup")
        await tg.wait_for_call("sendMessage", count=4)
    second, third, fourth = (user_texts(r) for r in llm.requests[1:])
    assert second[-1] == (
        "[User7] [The user replies to a message from Carol:]\n> dinner plans?\n"
        "[End of the quoted message]\n\nwhat does she mean?"
    )
    assert third[-1].startswith("[User7] [The user replies to your own earlier message:]\n> echo\n")
    # answered: never sent again
    assert fourth == [
        "[Carol] dinner plans?",
        "[User7] what does she mean?",
        "[User7] and this bit?",
        "[User7] thanks",
    ]


async def test_telegram_reply_to_a_picture_says_so_and_is_bounded(config, tg, llm) -> None:
    cfg = config()
    cfg.engine.max_quote_chars = 10
    async with daemon(cfg):
        photo = tg.inject_message(DM, DM, caption="a very long caption here", photo=True)
        await tg.wait_for_call("sendMessage")  # no vision: refused, not stored
        tg.inject_message(DM, DM, "what's in it?", reply_to_message=photo["message"]["message_id"])
        await tg.wait_for_call("sendMessage", count=2)
    (asked,) = user_texts(llm.requests[0])
    assert asked.splitlines()[:3] == [
        f"[The user replies to a message from User{DM}:]",
        "> a very lon […]",
        "> [a picture]",
    ]


async def test_a_topic_opening_message_is_no_quote(config, tg, llm) -> None:
    topic = tg.open_topic(GROUP, "T")
    async with daemon(config()):
        tg.inject_message(GROUP, 7, f"@{BOT_USERNAME} hi", chat_type="supergroup", topic=topic)
        await tg.wait_for_call("sendMessage")
    assert user_texts(llm.requests[0]) == [f"[User7] @{BOT_USERNAME} hi"]
