"""The Discord adapter end to end: real discord.py and the real App against a fake Discord."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yarl
from discord.gateway import DiscordWebSocket
from discord.http import Route

from bot.app import App
from bot.config import parse_config
from channels.discord import DEFAULT_API_BASE_URL
from tests.fakes.discord_server import Call, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, text
from tools import Tool

GUILD, CHANNEL = 1001, 2001
OTHER_GUILD, OTHER_CHANNEL = 1002, 2002
DM = 3001
ALICE, BOB, MALLORY = 4001, 4002, 4003


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    users = {ALICE: "Alice", BOB: "Bob", MALLORY: "Mallory"}
    async with FakeDiscord(
        guilds={GUILD: [CHANNEL], OTHER_GUILD: [OTHER_CHANNEL]}, users=users
    ) as f:
        yield f


@pytest.fixture
async def llm() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


@contextlib.asynccontextmanager
async def running(
    fake: FakeDiscord,
    llm: FakeOpenAI,
    db: Path,
    *,
    tools: Sequence[Tool] = (),
    stream: bool = False,
    token: str | None = None,
    **discord: Any,
) -> AsyncIterator[App]:
    """relaybot with only Discord enabled, talking to the fakes."""
    config = parse_config(
        {
            "llm": {"base_url": llm.base_url, "api_key": "k", "model": "fake-model"}
            | {"max_retries": 0, "stream": stream},
            "storage": {"path": str(db)},
            "discord": {"enabled": True, "token": token or fake.token}
            | {"api_base_url": fake.api_base_url, "allowed_users": [ALICE, BOB]}
            | discord,
        }
    )
    async with App(config, extra_tools=tools) as app:
        yield app


@pytest.fixture
async def bot(fake: FakeDiscord, llm: FakeOpenAI, tmp_path: Path) -> AsyncIterator[App]:
    async with running(fake, llm, tmp_path / "relaybot.db") as app:
        yield app


def posts(channel_id: int) -> str:
    return rf"/channels/{channel_id}/messages"


def content(expected: str) -> Any:
    return lambda call: call.json.get("content") == expected


def replied_to(call: Call) -> str | None:
    ref = call.json.get("message_reference")
    return str(ref["message_id"]) if ref else None


def user_texts(llm: FakeOpenAI) -> list[str]:
    return [m["content"] for r in llm.requests for m in r["messages"] if m["role"] == "user"]


# ---- conversations


async def test_mention_in_a_guild_gets_a_reply_to_that_message(bot: App, fake: FakeDiscord) -> None:
    msg = await fake.inject_message(CHANNEL, ALICE, "hello there", GUILD, mentions_bot=True)

    typing = await fake.wait_for_call("POST", rf"/channels/{CHANNEL}/typing")
    reply = await fake.wait_for_call("POST", posts(CHANNEL), content("echo: hello there"))

    assert replied_to(reply) == msg["id"]
    assert typing.at <= reply.at
    assert reply.json["allowed_mentions"]["parse"] == []  # the model cannot ping @everyone


async def test_a_reply_to_the_bot_counts_as_a_mention(bot: App, fake: FakeDiscord) -> None:
    await fake.inject_message(CHANNEL, ALICE, "first", GUILD, mentions_bot=True)
    answer = await fake.wait_for_call("POST", posts(CHANNEL), content("echo: first"))

    await fake.inject_message(CHANNEL, ALICE, "and then?", GUILD, reference=answer.response["id"])

    await fake.wait_for_call("POST", posts(CHANNEL), content("echo: and then?"))


async def test_guild_messages_without_a_mention_are_not_answered(
    bot: App, fake: FakeDiscord, llm: FakeOpenAI
) -> None:
    await fake.inject_message(CHANNEL, ALICE, "just chatting")
    await fake.inject_message(CHANNEL, ALICE, "just chatting", GUILD)
    await fake.inject_message(CHANNEL, ALICE, "now you", GUILD, mentions_bot=True)  # a barrier

    await fake.wait_for_call("POST", posts(CHANNEL), content("echo: now you"))
    assert user_texts(llm) == ["now you"]
    assert len(fake.calls_to("POST", posts(CHANNEL))) == 1


async def test_respond_in_guilds_all_answers_every_message(
    fake: FakeDiscord, llm: FakeOpenAI, tmp_path: Path
) -> None:
    async with running(fake, llm, tmp_path / "db", respond_in_guilds="all"):
        await fake.inject_message(CHANNEL, ALICE, "no mention needed", GUILD)
        await fake.wait_for_call("POST", posts(CHANNEL), content("echo: no mention needed"))


async def test_direct_messages_are_always_answered(bot: App, fake: FakeDiscord) -> None:
    msg = await fake.inject_message(DM, ALICE, "psst")

    reply = await fake.wait_for_call("POST", posts(DM), content("echo: psst"))
    assert replied_to(reply) == msg["id"]


async def test_bot_messages_are_ignored(bot: App, fake: FakeDiscord, llm: FakeOpenAI) -> None:
    await fake.inject_message(CHANNEL, 4999, "beep", GUILD, mentions_bot=True, author_bot=True)
    await fake.inject_message(DM, 4999, "beep boop", author_bot=True)
    await fake.inject_message(DM, ALICE, "human here")  # a barrier

    await fake.wait_for_call("POST", posts(DM), content("echo: human here"))
    assert user_texts(llm) == ["human here"]
    assert fake.calls_to("POST", posts(CHANNEL)) == []


async def test_unauthorised_user_is_told_and_the_model_not_asked(
    bot: App, fake: FakeDiscord, llm: FakeOpenAI
) -> None:
    await fake.inject_message(CHANNEL, MALLORY, "let me in", GUILD, mentions_bot=True)

    reply = await fake.wait_for_call("POST", posts(CHANNEL))
    assert "not allowed" in reply.json["content"]
    assert str(MALLORY) in reply.json["content"]
    assert llm.requests == []


async def test_guilds_outside_allowed_guilds_are_ignored(
    fake: FakeDiscord, llm: FakeOpenAI, tmp_path: Path
) -> None:
    async with running(fake, llm, tmp_path / "db", allowed_guilds=[GUILD]):
        await fake.inject_message(OTHER_CHANNEL, ALICE, "over here", OTHER_GUILD, mentions_bot=True)
        slash = await fake.inject_slash("reset", ALICE, OTHER_CHANNEL, OTHER_GUILD)
        await fake.inject_message(CHANNEL, ALICE, "in here", GUILD, mentions_bot=True)

        await fake.wait_for_call("POST", posts(CHANNEL), content("echo: in here"))
        callback = await fake.wait_for_call("POST", rf"/interactions/{slash.id}/.+/callback")
    assert callback.json["data"]["flags"] & 64  # ephemeral "not enabled here"
    assert user_texts(llm) == ["in here"]
    assert fake.calls_to("POST", posts(OTHER_CHANNEL)) == []
