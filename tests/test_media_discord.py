"""Pictures, files and voice in Discord, end to end: real discord.py and the real App against the
fake Discord (attachment URLs served as its CDN does) and the fake OpenAI server."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from bot.app import App
from bot.config import Config
from tests.fakes.discord_server import Call, FakeDiscord
from tests.fakes.media import png, voice
from tests.fakes.openai_server import FakeOpenAI, images_in, text, tool_call
from tools import File, ToolResult, tool

GUILD, CHANNEL, DM, ALICE = 1001, 2001, 3001, 4001


@tool
async def draw_chart(title: str) -> ToolResult:
    """Draw a chart."""
    return ToolResult.with_files(f"drew {title}", File(name="chart.png", data=png(title)))


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord(guilds={GUILD: [CHANNEL]}, users={ALICE: "Alice"}) as server:
        yield server


@pytest.fixture
def start(fake: FakeDiscord, make_config: Callable[..., Config]) -> Callable[..., Any]:
    @contextlib.asynccontextmanager
    async def run(**sections: Any) -> AsyncIterator[App]:
        discord = {"enabled": True, "token": fake.token, "api_base_url": fake.api_base_url}
        discord |= {"allowed_users": [ALICE]}
        config = make_config(discord=discord, llm={"vision": True}, **sections)
        async with App(config, extra_tools=(draw_chart,)) as app:
            yield app

    return run


def posts(channel_id: int) -> str:
    return rf"/channels/{channel_id}/messages"


def content(expected: str) -> Callable[[Call], bool]:
    return lambda call: (call.json or {}).get("content") == expected


async def test_an_image_attachment_reaches_the_model_as_a_picture(
    start: Any, fake: FakeDiscord, llm: FakeOpenAI
) -> None:
    picture = png("screenshot")
    attachment = fake.upload(picture, "screen.png", "image/png")
    llm.script(text("An error dialog."))
    async with start():
        await fake.inject_message(
            CHANNEL, ALICE, "what does it say?", GUILD, mentions_bot=True, attachments=[attachment]
        )
        await fake.wait_for_call("POST", posts(CHANNEL), content("An error dialog."))
    assert images_in(llm.requests[0]) == [("image/png", picture)]
    parts = next(m for m in llm.requests[0]["messages"] if m["role"] == "user")["content"]
    assert parts[0] == {"type": "text", "text": "[Alice] what does it say?"}
    assert fake.downloads == [attachment["url"]]


async def test_a_voice_message_reaches_the_model_as_its_transcript(
    start: Any, fake: FakeDiscord, llm: FakeOpenAI
) -> None:
    note = voice("dm")
    attachment = fake.upload(note, "voice-message.ogg", "audio/ogg", duration=3.5)
    llm.script_transcription("remind me to call mum")
    llm.script(text("Sure."))
    async with start(media={"transcription_model": "whisper-1"}):
        await fake.inject_message(DM, ALICE, "", attachments=[attachment])
        await fake.wait_for_call("POST", posts(DM), content("Sure."))
    shown = [c.json["content"] for c in fake.calls_to("POST", posts(DM))]
    assert shown == ["🎤 “remind me to call mum”", "Sure."]
    assert [m["content"] for m in llm.requests[0]["messages"][1:]] == ["remind me to call mum"]
    assert llm.transcriptions[0].data == note


async def test_a_tool_picture_is_uploaded_as_a_file_before_the_answer(
    start: Any, fake: FakeDiscord, llm: FakeOpenAI
) -> None:
    llm.script(tool_call("draw_chart", {"title": "q3"}), text("Here it is."))
    async with start():
        await fake.inject_message(DM, ALICE, "chart q3")
        answer = await fake.wait_for_call("POST", posts(DM), content("Here it is."))
    uploads = [c for c in fake.calls_to("POST", posts(DM)) if c.files]
    assert [c.files for c in uploads] == [{"chart.png": png("q3")}]
    assert uploads[0].at <= answer.at
    (shown,) = [m for m in fake.channel_messages(DM) if m["attachments"]]
    assert fake.attachment(int(shown["id"]), "chart.png") == png("q3")
