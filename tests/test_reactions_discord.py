"""Status reactions in Discord (issue 33), end to end: real discord.py and the real App against
the fake Discord, which takes the bot's own reactions as Discord does (PUT and DELETE
``/channels/{id}/messages/{id}/reactions/{emoji}/@me``, on a message of that channel, 403 without
the permission). 👀 while a turn works on a message, taken off once answered, ⚠️ when the turn
failed; a mention that started a thread has its status where the mention is. Synchronisation is
on recorded calls and on the model's hold, never on sleeps."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from bot.app import App
from bot.config import Config
from tests.fakes.discord_server import Call, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, error, hold, text

GUILD, CHANNEL = 1001, 2001
DM = 3001
ALICE = 4001
EYES, WARNING = "👀", "⚠️"


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord(guilds={GUILD: [CHANNEL]}, users={ALICE: "Alice"}) as server:
        yield server


@pytest.fixture
def start(fake: FakeDiscord, make_config: Callable[..., Config]) -> Callable[..., Any]:
    @contextlib.asynccontextmanager
    async def run(**discord: Any) -> AsyncIterator[App]:
        section = {
            "enabled": True,
            "token": fake.token,
            "api_base_url": fake.api_base_url,
            "allowed_users": [ALICE],
            "status_reactions": True,
        }
        async with App(make_config(discord=section | discord)) as app:
            yield app

    return run


def reacts(channel: int, message: int | str, emoji: str) -> str:
    return rf"/channels/{channel}/messages/{message}/reactions/{emoji}/@me"


def content(expected: str) -> Callable[[Call], bool]:
    return lambda call: call.json.get("content") == expected


async def test_eyes_while_the_turn_runs_taken_off_once_answered(
    start, fake: FakeDiscord, llm: FakeOpenAI
) -> None:
    go = asyncio.Event()
    llm.script(hold(go, text("Here you are.")))
    async with start():
        msg = await fake.inject_message(CHANNEL, ALICE, "find it", GUILD, mentions_bot=True)
        mid = int(msg["id"])
        await fake.wait_for_call("PUT", reacts(CHANNEL, mid, EYES))
        assert fake.bot_reactions(mid) == [EYES]
        assert not fake.calls_to("POST", rf"/channels/{CHANNEL}/messages")  # still working
        go.set()
        await fake.wait_for_call("POST", rf"/channels/{CHANNEL}/messages", content("Here you are."))
        await fake.wait_for_call("DELETE", reacts(CHANNEL, mid, EYES))
    assert fake.bot_reactions(mid) == []
    assert {c.status for c in fake.calls if "/reactions/" in c.path} == {204}


async def test_a_failed_turn_gets_the_warning_reaction(
    start, fake: FakeDiscord, llm: FakeOpenAI
) -> None:
    llm.script(error(400, "this model does not exist"))
    async with start():
        msg = await fake.inject_message(DM, ALICE, "hello")
        mid = int(msg["id"])
        await fake.wait_for_call("PUT", reacts(DM, mid, WARNING))
        await fake.wait_for_call("DELETE", reacts(DM, mid, EYES))
    assert fake.bot_reactions(mid) == [WARNING]


async def test_a_mention_that_started_a_thread_has_its_status_in_its_channel(
    start, fake: FakeDiscord, llm: FakeOpenAI
) -> None:
    llm.script(text("Answered in the thread."))
    async with start(reply_in_thread=True):
        msg = await fake.inject_message(CHANNEL, ALICE, "a question", GUILD, mentions_bot=True)
        mid = int(msg["id"])  # also the thread's id
        await fake.wait_for_call("POST", rf"/channels/{mid}/messages")
        await fake.wait_for_call("DELETE", reacts(CHANNEL, mid, EYES))
    put = fake.calls_to("PUT", rf"/channels/\d+/messages/{mid}/reactions/.+")
    assert [c.path for c in put] == [f"/channels/{CHANNEL}/messages/{mid}/reactions/{EYES}/@me"]
    assert fake.bot_reactions(mid) == []


async def test_without_the_permission_the_answer_comes_and_it_is_logged_once(
    start, fake: FakeDiscord, llm: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="engine.chat._turns._reactions")
    fake.no_reactions.add(CHANNEL)
    llm.script(text("One."), text("Two."))
    async with start():
        for words, answer in (("first", "One."), ("second", "Two.")):
            await fake.inject_message(CHANNEL, ALICE, words, GUILD, mentions_bot=True)
            await fake.wait_for_call("POST", rf"/channels/{CHANNEL}/messages", content(answer))
        first = await fake.wait_for_call("PUT", reacts(CHANNEL, r"\d+", EYES))
        await fake.wait_for_call(
            "PUT", reacts(CHANNEL, r"\d+", EYES), after=fake.calls.index(first) + 1
        )
    assert [c.status for c in fake.calls_to("PUT", reacts(CHANNEL, r"\d+", EYES))] == [403, 403]
    warned = [r for r in caplog.records if "status reaction" in r.getMessage()]
    assert len(warned) == 1 and "Missing Permissions" in warned[0].getMessage()


async def test_without_status_reactions_nothing_is_reacted(
    start, fake: FakeDiscord, llm: FakeOpenAI
) -> None:
    llm.script(text("Plain."))
    async with start(status_reactions=False):
        await fake.inject_message(DM, ALICE, "hi")
        await fake.wait_for_call("POST", rf"/channels/{DM}/messages")
    assert not [c for c in fake.calls if "/reactions/" in c.path]
