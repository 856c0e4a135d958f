"""Discord shards end to end: real discord.py (AutoShardedClient) and the real App against the
fake gateway, which routes each guild's events to shard ``(guild_id >> 22) % shard_count``.

One instance with every shard, and two instances (each with its own store) splitting the shards
with disjoint ``shard_ids``. Which instance answered is told by the model each one asks (the fake
model records it), never by timing.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from bot.app import App
from bot.config import Config
from channels._discord_shards import shard_layout, shard_of
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.test_discord import ALICE, callback, content, posts
from tools import tool
from tools.errors import ConfigError

G0 = FakeDiscord.guild_on_shard(0, 2)
G1 = FakeDiscord.guild_on_shard(1, 2)
C0, C1 = 2101, 2102
DM = 3101

MakeConfig = Callable[..., Config]


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    guilds = {G0: [C0], G1: [C1]}
    async with FakeDiscord(guilds=guilds, users={ALICE: "Alice"}, shards=2, max_concurrency=2) as f:
        yield f


@pytest.fixture
def start(fake: FakeDiscord, make_config: MakeConfig, tmp_path: Path) -> Callable[..., Any]:
    """``async with start(name, **discord_keys) as app``: an instance with its own store whose
    model is called `name` (so the fake model's requests tell the instances apart)."""

    @contextlib.asynccontextmanager
    async def run(
        name: str = "fake-model", *, tools: Any = (), **discord: Any
    ) -> AsyncIterator[App]:
        section = {
            "enabled": True,
            "token": fake.token,
            "api_base_url": fake.api_base_url,
            "allowed_users": [ALICE],
        }
        config = make_config(
            discord=section | discord,
            llm={"model": name},
            storage={"path": str(tmp_path / f"{name}.db")},
        )
        async with App(config, extra_tools=tools) as app:
            yield app

    return run


def answered_by(llm: FakeOpenAI, words: str) -> list[str]:
    """The models asked about `words` (one per instance that took the message)."""
    return [r["model"] for r in llm.requests if words in str(r["messages"][-1])]


async def identify_times(fake: FakeDiscord) -> tuple[float, float]:
    """When the first two IDENTIFYs arrive (loop time)."""
    loop = asyncio.get_running_loop()
    await fake.wait_for_gateway_op(2, timeout=10)
    first = loop.time()
    index = next(i for i, p in enumerate(fake.gateway_ops) if p["op"] == 2)
    await fake.wait_for_gateway_op(2, timeout=10, after=index + 1)
    return first, loop.time()


def test_shard_config_mistakes_name_the_key(make_config: MakeConfig) -> None:
    cases = [
        ({"shard_ids": [0]}, "discord.shard_ids: needs shard_count"),
        ({"shard_count": 2, "shard_ids": [0, 2]}, "the ids run from 0 to 1: [2]"),
        ({"shard_count": 2, "shard_ids": []}, "discord.shard_ids: is empty"),
        ({"shard_count": 2, "shard_ids": [1, 1]}, "names a shard twice"),
        ({"shard_count": 0}, "discord.shard_count: must be greater than or equal to 1"),
    ]
    for keys, message in cases:
        with pytest.raises(ConfigError) as err:
            make_config(discord=keys)
        assert message in str(err.value), keys


def test_guilds_are_routed_as_discord_does() -> None:
    assert (shard_of(G0, 2), shard_of(G1, 2)) == (0, 1)
    assert shard_of(81384788765712384, 4) == (81384788765712384 >> 22) % 4
    assert shard_layout(None, None) == "as many shards as Discord recommends, all in this instance"
    assert shard_layout(2, [1]) == (
        "shard(s) 1 of 2 in this instance (1 to other instances, taken over while theirs is down)"
    )


async def test_one_instance_runs_every_shard_discord_recommends(
    start: Callable[..., Any], fake: FakeDiscord, llm: FakeOpenAI
) -> None:
    deleted: list[str] = []

    @tool(destructive=True, summary="Delete {path}")
    async def delete_file(path: str) -> str:
        """Delete a file."""
        deleted.append(path)
        return f"deleted {path}"

    identifies = asyncio.ensure_future(identify_times(fake))
    async with start(tools=[delete_file]):
        first, second = await identifies
        assert second - first < 2.5  # no 5 s pause: max_concurrency is 2, one bucket each
        await fake.wait_for_shard(1)
        assert sorted(fake.identified()) == [(0, 2), (1, 2)]
        await fake.inject_message(C0, ALICE, "on shard zero", G0, mentions_bot=True)
        await fake.inject_message(C1, ALICE, "on shard one", G1, mentions_bot=True)
        await fake.inject_message(DM, ALICE, "in a DM")  # DMs come on shard 0
        await fake.wait_for_call("POST", posts(C0), content("echo: [Alice] on shard zero"))
        await fake.wait_for_call("POST", posts(C1), content("echo: [Alice] on shard one"))
        await fake.wait_for_call("POST", posts(DM), content("echo: in a DM"))

        # A press on shard 1 resumes the turn it belongs to, once.
        llm.script(tool_call("delete_file", {"path": "notes.txt"}), text("Deleted notes.txt."))
        await fake.inject_message(C1, ALICE, "delete notes.txt", G1, mentions_bot=True)
        prompt = await fake.wait_for_call("POST", posts(C1), lambda c: bool(c.json["components"]))
        buttons = {b["label"]: b["custom_id"] for b in prompt.json["components"][0]["components"]}
        press = await fake.inject_button(
            buttons["Allow once"], ALICE, C1, int(prompt.response["id"])
        )
        await fake.wait_for_call("POST", callback(press.id))
        await fake.wait_for_call("POST", posts(C1), content("Deleted notes.txt."))

        # A shard that loses its connection resumes it and gets what it missed.
        await fake.drop_connection(shard=1)
        await fake.inject_message(C1, ALICE, "while shard one was away", G1, mentions_bot=True)
        await fake.wait_for_call(
            "POST", posts(C1), content("echo: [Alice] while shard one was away")
        )
    assert deleted == ["notes.txt"]
    assert "/gateway/resume" in fake.connections
    assert len(fake.identified()) == 2  # shard 1 resumed; nothing identified again


async def test_two_instances_split_the_shards(
    start: Callable[..., Any], fake: FakeDiscord, llm: FakeOpenAI
) -> None:
    async with start("model-a", shard_count=2, shard_ids=[0]):
        async with start("model-b", shard_count=2, shard_ids=[1]):
            await fake.wait_for_shard(1)
            assert sorted(fake.identified()) == [(0, 2), (1, 2)]
            for n in range(3):  # one at a time: queued messages would share a turn
                await fake.inject_message(C0, ALICE, f"zero {n}", G0, mentions_bot=True)
                await fake.inject_message(C1, ALICE, f"one {n}", G1, mentions_bot=True)
                await fake.wait_for_call("POST", posts(C0), content(f"echo: [Alice] zero {n}"))
                await fake.wait_for_call("POST", posts(C1), content(f"echo: [Alice] one {n}"))
            await fake.inject_message(DM, ALICE, "direct")
            await fake.wait_for_call("POST", posts(DM), content("echo: direct"))
    for n in range(3):  # each message reached exactly the instance that holds its shard
        assert answered_by(llm, f"zero {n}") == ["model-a"]
        assert answered_by(llm, f"one {n}") == ["model-b"]
    assert answered_by(llm, "direct") == ["model-a"]
    assert len(fake.calls_to("POST", posts(C0))) == 3
    assert len(fake.calls_to("POST", posts(C1))) == 3
