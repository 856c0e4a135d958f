"""Discord threads and replies (issue 33), end to end: real discord.py and the real App against
the fake Discord, which has threads as Discord defines them (started on a message with the
message's id, THREAD_CREATE, archived and locked, deleted). A thread is a conversation of its own;
with `[discord] reply_in_thread` a mention starts one and the bot follows it there without
mentions; a thread gone before the answer sends it to the channel with a note. Synchronisation is
on recorded calls; a later message is the barrier that shows an earlier one was ignored."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from bot.app import App
from bot.config import Config
from tests.fakes.discord_server import Call, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, hold, text

GUILD, CHANNEL = 1001, 2001
ALICE, BOB = 4001, 4002


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord(guilds={GUILD: [CHANNEL]}, users={ALICE: "Alice", BOB: "Bob"}) as f:
        yield f


@pytest.fixture
def start(fake: FakeDiscord, make_config: Callable[..., Config]) -> Callable[..., Any]:
    @contextlib.asynccontextmanager
    async def run(**discord: Any) -> AsyncIterator[App]:
        section = {
            "enabled": True,
            "token": fake.token,
            "api_base_url": fake.api_base_url,
            "allowed_users": [ALICE, BOB],
        }
        async with App(make_config(discord=section | discord)) as app:
            yield app

    return run


def posts(channel_id: int | str) -> str:
    return rf"/channels/{channel_id}/messages"


def content(expected: str) -> Callable[[Call], bool]:
    return lambda call: call.json.get("content") == expected


def user_texts(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "user"]


async def test_a_thread_is_a_conversation_of_its_own(start, fake: FakeDiscord, llm) -> None:
    """Without the option too: a message in a thread is answered in it, from its own history."""
    async with start():
        await fake.inject_message(CHANNEL, ALICE, "in the channel", GUILD, mentions_bot=True)
        await fake.wait_for_call("POST", posts(CHANNEL))
        thread = await fake.create_thread(CHANNEL, GUILD, "side talk", ALICE)
        await fake.inject_message(thread, ALICE, "in the thread", GUILD, mentions_bot=True)
        await fake.wait_for_call("POST", posts(thread), content("echo: [Alice] in the thread"))
    assert user_texts(llm.requests[1]) == ["[Alice] in the thread"]


async def test_reply_in_thread_starts_a_thread_and_follows_it_without_mentions(
    start, fake: FakeDiscord, llm: FakeOpenAI
) -> None:
    async with start(reply_in_thread=True):
        asked = await fake.inject_message(
            CHANNEL,
            ALICE,
            "plan the team offsite for next spring please",
            GUILD,
            mentions_bot=True,
        )
        started = await fake.wait_for_call("POST", rf"/channels/{CHANNEL}/messages/\d+/threads")
        thread = int(asked["id"])
        await fake.wait_for_call("POST", posts(thread))
        await fake.inject_message(thread, BOB, "somewhere warm", GUILD)  # no mention
        await fake.wait_for_call("POST", posts(thread), content("echo: [Bob] somewhere warm"))
        # a thread someone else started still needs a mention
        other = await fake.create_thread(CHANNEL, GUILD, "theirs", BOB)
        await fake.inject_message(other, BOB, "chatter", GUILD)
        barrier = await fake.inject_message(CHANNEL, ALICE, "barrier", GUILD, mentions_bot=True)
        await fake.wait_for_call("POST", posts(barrier["id"]), content("echo: [Alice] barrier"))
    assert started.path == f"/channels/{CHANNEL}/messages/{asked['id']}/threads"
    assert started.json["name"] == "plan the team offsite for next spring please"
    assert fake.threads[thread]["owner_id"] == str(fake.bot_id)
    assert fake.calls_to("POST", posts(CHANNEL)) == []  # nothing answered in the channel
    assert user_texts(llm.requests[1])[-1] == "[Bob] somewhere warm"
    assert len(user_texts(llm.requests[1])) == 2  # the thread's own conversation
    assert not [c for c in fake.calls_to("POST", posts(other))]


async def test_a_mention_delivered_twice_is_answered_once_in_its_thread(
    start, fake: FakeDiscord, llm: FakeOpenAI
) -> None:
    async with start(reply_in_thread=True):
        asked = await fake.inject_message(CHANNEL, ALICE, "once", GUILD, mentions_bot=True)
        await fake.wait_for_call("POST", posts(asked["id"]))
        await fake._dispatch("MESSAGE_CREATE", asked, GUILD)  # as a resumed session does
        await fake.inject_message(int(asked["id"]), ALICE, "next", GUILD)
        await fake.wait_for_call("POST", posts(asked["id"]), content("echo: [Alice] next"))
    refused = fake.calls_to("POST", rf"/channels/{CHANNEL}/messages/\d+/threads")
    assert [c.status for c in refused] == [201, 400]
    assert [user_texts(r)[-1] for r in llm.requests] == ["[Alice] once", "[Alice] next"]


@pytest.mark.parametrize("how", ["locked", "deleted"])
async def test_a_thread_gone_before_the_answer_sends_it_to_the_channel_with_a_note(
    start, fake: FakeDiscord, llm: FakeOpenAI, how: str
) -> None:
    release = asyncio.Event()
    llm.script(hold(release, text("Here is the plan.")))
    async with start(reply_in_thread=True):
        asked = await fake.inject_message(CHANNEL, ALICE, "a plan", GUILD, mentions_bot=True)
        thread = int(asked["id"])
        await fake.wait_for_call("POST", rf"/channels/{thread}/typing")
        if how == "locked":
            await fake.archive_thread(thread, locked=True)
        else:
            await fake.delete_thread(thread)
        release.set()
        answer = await fake.wait_for_call("POST", posts(CHANNEL), content("Here is the plan."))
    note, _ = fake.calls_to("POST", posts(CHANNEL))
    assert "closed or deleted" in note.json["content"]
    assert answer.status == 200 and "message_reference" not in answer.json


async def test_a_reply_in_discord_carries_the_quoted_message(
    start, fake: FakeDiscord, llm: FakeOpenAI
) -> None:
    async with start(respond_in_guilds="all"):
        said = await fake.inject_message(CHANNEL, BOB, "the build is red again", GUILD)
        await fake.wait_for_call("POST", posts(CHANNEL))
        after = len(fake.calls)
        await fake.inject_message(CHANNEL, ALICE, "why?", GUILD, reference=said["id"])
        await fake.wait_for_call("POST", posts(CHANNEL), after=after)
    assert user_texts(llm.requests[1])[-1] == (
        "[Alice] [The user replies to a message from Bob:]\n> the build is red again\n"
        "[End of the quoted message]\n\nwhy?"
    )
