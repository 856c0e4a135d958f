"""Structured answers on Discord as components v2 cards (issue 44), end to end: the real App and
discord.py against the fake Discord, which applies Discord's components rules (the flag, no
content with it, the limits). An answer with a table or headings arrives as one card (a
container of text displays, separators between sections, the table as aligned code); a plain
answer stays content; a refused card arrives once as text. Synchronisation is on recorded calls.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import discord
import pytest
from discord.http import Route

from bot.app import App
from bot.config import Config
from channels.discord import DiscordChannel
from tests.fakes.discord_components import IS_COMPONENTS_V2
from tests.fakes.discord_server import Call, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, text

GUILD, CHANNEL = 1001, 2001
ALICE = 4001
POSTS = rf"/channels/{CHANNEL}/messages"
ANSWER = """Two plans.

## Prices

| Plan | Price |
|:-----|------:|
| Free | 0 € |
| Team | 12 € |

## Steps

1. Pick a plan.
2. Pay."""


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord(guilds={GUILD: [CHANNEL]}, users={ALICE: "Alice"}) as server:
        yield server


@pytest.fixture
def start(fake: FakeDiscord, make_config: Callable[..., Config]) -> Callable[..., Any]:
    @contextlib.asynccontextmanager
    async def run(llm: dict[str, Any] | None = None) -> AsyncIterator[App]:
        section = {"enabled": True, "token": fake.token, "api_base_url": fake.api_base_url}
        config = make_config(discord=section | {"allowed_users": [ALICE]}, llm=llm or {})
        async with App(config, channels=[DiscordChannel(config.discord)]) as app:
            yield app

    return run


def texts(component: dict[str, Any]) -> list[str]:
    if component["type"] == 10:
        return [component["content"]]
    return [t for child in component.get("components", []) for t in texts(child)]


def created(call: Call) -> bool:
    return call.response is not None and "id" in call.response


async def test_a_table_answer_arrives_as_one_card(
    start, fake: FakeDiscord, llm: FakeOpenAI
) -> None:
    llm.script(text(ANSWER))
    async with start():
        await fake.inject_message(CHANNEL, ALICE, "prices?", GUILD, mentions_bot=True)
        sent = await fake.wait_for_call("POST", POSTS, created)
    body = sent.json or {}
    assert body["flags"] & IS_COMPONENTS_V2 and not body.get("content")
    (container,) = body["components"]
    assert container["type"] == 17
    kinds = [c["type"] for c in container["components"]]
    assert kinds == [10, 14, 10, 14, 10]  # three sections, separators between
    intro, prices, steps = texts(container)
    assert intro == "Two plans." and prices.startswith("## Prices\n\n```\nPlan | Price")
    assert "Team | 12 €" in prices and steps.startswith("## Steps\n\n1. Pick a plan.")
    assert body["enforce_nonce"] is True and len(body["nonce"]) <= 25  # sent once, as text is
    (shown,) = fake.channel_messages(CHANNEL)[1:]  # after the user's message
    assert shown["flags"] & IS_COMPONENTS_V2 and shown["content"] == ""


async def test_a_plain_answer_stays_content(start, fake: FakeDiscord, llm: FakeOpenAI) -> None:
    llm.script(text("It costs **12 €**.\n\n- one seat\n- ten seats"))
    async with start():
        await fake.inject_message(CHANNEL, ALICE, "price?", GUILD, mentions_bot=True)
        sent = await fake.wait_for_call("POST", POSTS, created)
    body = sent.json or {}
    assert body["content"].startswith("It costs **12 €**.") and not body.get("flags")


async def test_a_refused_card_arrives_once_as_text(
    start, fake: FakeDiscord, llm: FakeOpenAI
) -> None:
    fake.refuse_components_v2 = True
    llm.script(text(ANSWER))
    async with start():
        await fake.inject_message(CHANNEL, ALICE, "prices?", GUILD, mentions_bot=True)
        sent = await fake.wait_for_call("POST", POSTS, created)
    refused = [c for c in fake.calls_to("POST", POSTS) if not created(c)]
    assert len(refused) == 1 and (refused[0].json or {})["flags"] & IS_COMPONENTS_V2
    content = (sent.json or {})["content"]
    assert content.startswith("Two plans.\n\n## Prices\n\n```\nPlan | Price")  # table as code
    ours = [m for m in fake.channel_messages(CHANNEL) if m["author"]["id"] == str(fake.bot_id)]
    assert [m["content"] for m in ours] == [content]  # once, whole


async def test_a_streamed_answer_ends_as_a_card(start, fake: FakeDiscord, llm: FakeOpenAI) -> None:
    llm.stream_chunk_chars, llm.stream_chunk_delay_s = 20, 0.05
    llm.script(text(ANSWER))
    async with start(llm={"stream": True}):
        await fake.inject_message(CHANNEL, ALICE, "prices?", GUILD, mentions_bot=True)
        final = await fake.wait_for_call(
            "PATCH",
            POSTS + r"/\d+",
            lambda c: (c.json or {}).get("flags", 0) & IS_COMPONENTS_V2,
            timeout=20,
        )
    (first,) = fake.calls_to("POST", POSTS)
    growing = first.json or {}
    assert growing["content"] and not growing.get("flags", 0) & IS_COMPONENTS_V2  # text, growing
    assert final.response is not None and final.response["flags"] & IS_COMPONENTS_V2
    (shown,) = fake.channel_messages(CHANNEL)[1:]
    assert shown["content"] == "" and "Team | 12 €" in "".join(texts(shown["components"][0]))


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (
            {
                "content": "x",
                "flags": IS_COMPONENTS_V2,
                "components": [{"type": 10, "content": "y"}],
            },
            "content",
        ),
        ({"content": "", "components": [{"type": 10, "content": "y"}]}, "IS_COMPONENTS_V2"),
        ({"flags": IS_COMPONENTS_V2, "components": [{"type": 10, "content": "y" * 4001}]}, "4000"),
        ({"flags": IS_COMPONENTS_V2, "components": [{"type": 14}] * 41}, "40"),
        ({"flags": IS_COMPONENTS_V2, "components": [{"type": 17, "components": []}]}, "empty"),
    ],
)
async def test_the_fake_refuses_what_discord_refuses(
    fake: FakeDiscord, body: dict[str, Any], words: str
) -> None:
    base = discord.http.Route.BASE  # process-wide in discord.py: put back after
    client = discord.Client(intents=discord.Intents.none())
    try:
        discord.http.Route.BASE = fake.api_base_url
        await client.login(fake.token)
        route = Route("POST", "/channels/{channel_id}/messages", channel_id=CHANNEL)
        with pytest.raises(discord.HTTPException, match=words) as refused:
            await client.http.request(route, json=body)
    finally:
        await client.close()
        discord.http.Route.BASE = base
    assert refused.value.status == 400 and refused.value.code == 50035
    assert fake.channel_messages(CHANNEL) == []
