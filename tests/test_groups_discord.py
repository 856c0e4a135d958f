"""Groups on Discord (issue 44). Other bots: a message whose author is a bot, dropped before, is
answered where ``[access] bots`` lists it, addressed to relaybot in a server, never in a DM; one
not listed stays unanswered and is told nothing. Private replies: in a server, the answers to
/usage, /memory, /settings and /permissions are ephemeral (the member who asked alone sees them).
discord.py against the fake Discord."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from bot.app import App
from channels.discord import DiscordChannel
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.test_discord import (
    ALICE,
    CHANNEL,
    DM,
    EPHEMERAL,
    GUILD,
    callback,
    content,
    fake,
    posts,
    user_texts,
)

__all__ = ["fake"]  # the fixture, shared with test_discord.py
PEER, STRANGER = 4999, 4998


@contextlib.asynccontextmanager
async def relaybot(fake: FakeDiscord, make_config: Callable[..., Any]) -> AsyncIterator[App]:
    section = {
        "enabled": True,
        "token": fake.token,
        "api_base_url": fake.api_base_url,
        "allowed_users": [ALICE],
    }
    config = make_config(discord=section, access={"bots": [f"discord:{PEER}"]})
    async with App(config, channels=[DiscordChannel(config.discord)]) as app:
        yield app


async def test_a_listed_bot_is_answered_in_a_server_and_others_are_not(
    fake: FakeDiscord, make_config: Callable[..., Any], llm: FakeOpenAI
) -> None:
    async with relaybot(fake, make_config):
        await fake.inject_message(
            CHANNEL, STRANGER, "beep", GUILD, mentions_bot=True, author_bot=True
        )
        await fake.inject_message(DM, PEER, "psst", author_bot=True)  # a bot's DM: never
        await fake.inject_message(CHANNEL, PEER, "not to you", GUILD, author_bot=True)
        await fake.inject_message(
            CHANNEL, PEER, "hello relay", GUILD, mentions_bot=True, author_bot=True
        )
        await fake.wait_for_call("POST", posts(CHANNEL))
        await fake.inject_message(DM, ALICE, "human here")  # a barrier
        await fake.wait_for_call("POST", posts(DM), content("echo: human here"))
    assert user_texts(llm) == ["[user4999] hello relay", "human here"]
    assert len(fake.calls_to("POST", posts(CHANNEL))) == 1


async def test_personal_slash_commands_answer_the_member_alone_in_a_server(
    fake: FakeDiscord, make_config: Callable[..., Any], llm: FakeOpenAI
) -> None:
    async with relaybot(fake, make_config):
        usage = await fake.inject_slash("usage", ALICE, CHANNEL, GUILD)
        private = await fake.wait_for_call("POST", callback(usage.id))
        reset = await fake.inject_slash("reset", ALICE, CHANNEL, GUILD)  # about the chat: public
        public = await fake.wait_for_call("POST", callback(reset.id))
        mine = await fake.inject_slash("usage", ALICE, DM)  # a DM is private anyway
        in_dm = await fake.wait_for_call("POST", callback(mine.id))
    assert private.json["data"]["flags"] & EPHEMERAL
    assert not public.json["data"].get("flags", 0) & EPHEMERAL
    assert not in_dm.json["data"].get("flags", 0) & EPHEMERAL
