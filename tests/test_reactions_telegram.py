"""Status reactions in Telegram (issue 33), end to end: the real daemon and python-telegram-bot
against the fake Bot API, which takes setMessageReaction as Telegram does (one reaction from a
bot, only the emoji of Telegram's list, none in a chat whose admins left it out). 👀 while a
turn works on a message, taken off once answered, 😱 when the turn failed; never in the way of
the answer. Synchronisation is on recorded calls and on the model's hold, never on sleeps."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from bot.config import Config
from channels.telegram._reactions import EMOJI
from engine import Reaction
from tests.fakes.media import png
from tests.fakes.openai_server import FakeOpenAI, error, hold, text
from tests.fakes.telegram_server import REACTION_EMOJI, FakeTelegram
from tests.test_telegram import daemon, telegram_config

DM = 1001
FORUM = -100777


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


@pytest.fixture
def config(make_config: Callable[..., Config], tg: FakeTelegram) -> Callable[..., Config]:
    return functools.partial(telegram_config, make_config, tg, status_reactions=True)


def reaction(emoji: str | None) -> Callable[[dict[str, Any]], bool]:
    """A setMessageReaction call that sets `emoji` (None: takes the reaction off)."""
    want = [] if emoji is None else [{"type": "emoji", "emoji": emoji}]
    return lambda p: (p.get("reaction") or []) == want


def test_every_status_is_an_emoji_telegram_lets_a_bot_react_with() -> None:
    assert {e for e in EMOJI.values() if e is not None} <= REACTION_EMOJI
    assert EMOJI[Reaction.WORKING] == "👀" and EMOJI[Reaction.DONE] is None


def test_off_unless_asked(make_config: Callable[..., Config], tg: FakeTelegram) -> None:
    assert telegram_config(make_config, tg).telegram.status_reactions is False


async def test_eyes_while_the_turn_runs_taken_off_once_answered(
    config, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    go = asyncio.Event()
    llm.script(hold(go, text("Here you are.")))
    async with daemon(config()):
        mid = tg.inject_message(DM, DM, "find it")["message"]["message_id"]
        await tg.wait_for_call("setMessageReaction", reaction("👀"))
        assert tg.reactions(DM, mid) == ["👀"]
        assert not tg.calls_of("sendMessage")  # the turn is still working
        go.set()
        await tg.wait_for_call("sendMessage", lambda p: p.get("text") == "Here you are.")
        await tg.wait_for_call("setMessageReaction", reaction(None))
    assert tg.reactions(DM, mid) == []
    assert [c.status for c in tg.calls_of("setMessageReaction")] == [200, 200]


async def test_a_failed_turn_gets_the_warning_reaction(
    config, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    llm.script(error(400, "this model does not exist"))
    async with daemon(config()):
        mid = tg.inject_message(DM, DM, "hello")["message"]["message_id"]
        await tg.wait_for_call("sendMessage")  # the apology
        await tg.wait_for_call("setMessageReaction", reaction("😱"))
    assert tg.reactions(DM, mid) == ["😱"]


async def test_an_album_shows_its_status_once_and_none_is_left_behind(
    config, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    llm.script(text("Two pictures."))
    async with daemon(config(llm={"vision": True})) as app:
        app.dispatcher.intake.albums.window_s = 2.0  # generous: the parts come in two polls here
        first = tg.inject_message(DM, DM, photo=tg.upload_photo(png("a")), media_group_id="al")
        await tg.wait_for_call("getUpdates", lambda p: (p.get("offset") or 0) > first["update_id"])
        second = tg.inject_message(DM, DM, photo=tg.upload_photo(png("b")), media_group_id="al")
        await tg.wait_for_call("sendMessage", lambda p: p.get("text") == "Two pictures.")
        await tg.wait_for_call("setMessageReaction", reaction(None))
        tg.inject_message(DM, DM, "thanks")  # a barrier: every status of the album went out
        await tg.wait_for_call("setMessageReaction", reaction(None), count=2)
    # Telegram puts an album's reactions on its first message: the last word there is "none"
    ids = (first["message"]["message_id"], second["message"]["message_id"])
    assert [tg.reactions(DM, i) for i in ids] == [[], []]


async def test_a_message_in_a_forum_topic_gets_its_status_in_its_chat(
    config, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    topic = tg.open_topic(FORUM, "Ideas")
    llm.script(text("An idea."))
    async with daemon(config(group_mode="all")):
        update = tg.inject_message(FORUM, 7, "any idea?", chat_type="supergroup", topic=topic)
        mid = update["message"]["message_id"]
        await tg.wait_for_call("sendMessage", lambda p: p.get("text") == "An idea.")
        await tg.wait_for_call("setMessageReaction", reaction(None))
    first = tg.calls_of("setMessageReaction")[0].params
    assert (first["chat_id"], first["message_id"]) == (FORUM, mid)
    assert "message_thread_id" not in first  # a message id is its chat's, topic or not
    assert tg.reactions(FORUM, mid) == []


async def test_a_slow_reaction_never_holds_up_the_answer(
    config, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    llm.script(text("Quick."))
    held = tg.hold("setMessageReaction", reaction("👀"))  # Telegram is slow to take the 👀
    async with daemon(config()):
        mid = tg.inject_message(DM, DM, "quick one")["message"]["message_id"]
        await asyncio.wait_for(held.arrived.wait(), 5)
        await tg.wait_for_call("sendMessage", lambda p: p.get("text") == "Quick.")
        assert held.call is not None and not held.call.answered
        tg.unhold(held)
        await tg.wait_for_call("setMessageReaction", reaction(None))
    eyes, cleared = tg.calls_of("setMessageReaction")  # in order, one at a time
    assert eyes.params["reaction"] and eyes.at < cleared.at
    assert tg.reactions(DM, mid) == []


async def test_flood_control_on_a_reaction_is_waited_out(
    config, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    llm.script(text("Quick."))
    tg.fail_next("setMessageReaction", 429, retry_after=1)
    async with daemon(config()):
        mid = tg.inject_message(DM, DM, "quick one")["message"]["message_id"]
        await tg.wait_for_call("sendMessage", lambda p: p.get("text") == "Quick.")
        cleared = await tg.wait_for_call("setMessageReaction", reaction(None), status=200)
    refused, eyes, _ = tg.calls_of("setMessageReaction")
    assert refused.status == 429 and eyes.status == 200
    assert eyes.at - refused.at >= 0.9  # retry_after honoured (PTB's rate limiter)
    assert eyes.at < cleared.at  # in order: 👀 is never left behind by an earlier clear
    assert tg.reactions(DM, mid) == []


async def test_a_chat_that_refuses_reactions_is_answered_and_logged_once(
    config, tg: FakeTelegram, llm: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="engine.chat._turns._reactions")
    tg.chat_reactions[DM] = {"👍"}  # its admins allow no other reaction
    llm.script(text("One."), text("Two."))
    async with daemon(config()):
        tg.inject_message(DM, DM, "first")
        await tg.wait_for_call("sendMessage", lambda p: p.get("text") == "One.")
        tg.inject_message(DM, DM, "second")
        await tg.wait_for_call("sendMessage", lambda p: p.get("text") == "Two.")
        await tg.wait_for_call("setMessageReaction", count=4)
    eyes = [c for c in tg.calls_of("setMessageReaction") if reaction("👀")(c.params)]
    assert [c.status for c in eyes] == [400, 400]
    warned = [r for r in caplog.records if "status reaction" in r.getMessage()]
    assert len(warned) == 1 and "reaction_invalid" in warned[0].getMessage().lower()


async def test_without_status_reactions_nothing_is_reacted(
    make_config: Callable[..., Config], tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    llm.script(text("Plain."))
    async with daemon(telegram_config(make_config, tg)):
        tg.inject_message(DM, DM, "hi")
        await tg.wait_for_call("sendMessage")
    assert tg.calls_of("setMessageReaction") == []
