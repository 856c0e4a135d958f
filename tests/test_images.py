"""Pictures made on request (issue 30): generate_image through the fake OpenAI server's
/images/generations, the picture sent as a photo on Telegram and an attachment on Discord, a
marker kept in the conversation, and [limits] images_per_day. Through the real App and adapters;
synchronisation is by the fakes' recorded calls."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from bot.app import App
from bot.config import Config
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, error, text, tool_call
from tests.fakes.telegram_server import FakeTelegram

DM = 1001


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


@pytest.fixture
def telegram(make_config: Callable[..., Config], tg: FakeTelegram) -> Callable[..., Any]:
    @contextlib.asynccontextmanager
    async def run(**sections: Any) -> AsyncIterator[App]:
        section = {"enabled": True, "token": tg.token, "api_base_url": tg.base_url}
        section |= {"allowed_users": ["*"], "poll_timeout_s": 5}
        media = {"image_model": "dall-e-3"} | sections.pop("media", {})
        async with App(make_config(telegram=section, media=media, **sections)) as app:
            yield app

    return run


def to(chat: int) -> Callable[[dict[str, Any]], bool]:
    return lambda p: p.get("chat_id") == chat


def tool_results(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


async def test_draw_a_cat_sends_the_picture_as_a_photo_before_the_answer(
    telegram: Any, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    llm.script(
        tool_call("generate_image", {"prompt": "a ginger cat on a windowsill"}),
        text("Here is your cat."),
    )
    async with telegram() as app:
        tg.inject_message(DM, DM, "draw a cat")
        photo = await tg.wait_for_call("sendPhoto", to(DM))
        answer = await tg.wait_for_call("sendMessage", to(DM))
    assert photo.at <= answer.at and answer.params["text"] == "Here is your cat."
    (drawn,) = llm.image_requests
    assert (drawn.model, drawn.prompt, drawn.size) == (
        "dall-e-3",
        "a ginger cat on a windowsill",
        "1024x1024",
    )
    (message_id,) = [m for (chat, m), msg in tg.messages.items() if chat == DM and "photo" in msg]
    assert tg.document(DM, message_id) == ("picture.png", drawn.png)
    (result,) = tool_results(llm.requests[1])
    assert "Sent to the user as files: picture.png (image/png" in result
    # the marker stays in the conversation: the stored tool result, not the picture's bytes
    path = app.config.storage.resolved_path()
    with sqlite3.connect(path) as db:
        stored = [r[0] for r in db.execute("SELECT content FROM messages WHERE role='tool'")]
    assert any("picture.png" in s for s in stored)
    assert drawn.png not in path.read_bytes()


async def test_images_per_day_stops_a_user_after_their_pictures(
    telegram: Any, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    llm.script(
        tool_call("generate_image", {"prompt": "a cat"}),
        text("A cat."),
        tool_call("generate_image", {"prompt": "a dog"}),
        text("No more pictures today."),
    )
    async with telegram(limits={"images_per_day": 1}):
        tg.inject_message(DM, DM, "draw a cat")
        await tg.wait_for_call("sendMessage", to(DM))
        tg.inject_message(DM, DM, "draw a dog")
        await tg.wait_for_call("sendMessage", to(DM), count=2)
    assert [d.prompt for d in llm.image_requests] == ["a cat"]
    assert len(tg.calls_of("sendPhoto")) == 1
    refused = tool_results(llm.requests[3])[-1]
    assert "today's 1 pictures" in refused and "00:00 UTC" in refused


async def test_a_refused_picture_is_told_to_the_model_and_the_turn_goes_on(
    telegram: Any, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    llm.script_image(error(400, "Your request was rejected by the safety system."))
    llm.script(tool_call("generate_image", {"prompt": "x"}), text("I could not draw that."))
    async with telegram():
        tg.inject_message(DM, DM, "draw x")
        await tg.wait_for_call("sendMessage", to(DM))
    assert tg.calls_of("sendPhoto") == []
    (result,) = tool_results(llm.requests[1])
    assert "could not be made" in result and "safety system" in result


ALICE, DISCORD_DM = 4001, 3001


async def test_a_picture_is_an_attachment_on_discord_with_a_gpt_image_model(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    llm.script(tool_call("generate_image", {"prompt": "a cat", "size": "1536x1024"}), text("Done."))
    async with FakeDiscord(guilds={}, users={ALICE: "Alice"}) as fake:
        discord = {"enabled": True, "token": fake.token, "api_base_url": fake.api_base_url}
        config = make_config(
            discord=discord | {"allowed_users": [ALICE]}, media={"image_model": "gpt-image-1"}
        )
        async with App(config):
            await fake.inject_message(DISCORD_DM, ALICE, "draw a cat, wide")
            upload = await fake.wait_for_call(
                "POST", rf"/channels/{DISCORD_DM}/messages", lambda c: bool(c.files)
            )
    (drawn,) = llm.image_requests
    assert drawn.size == "1536x1024" and upload.files == {"picture.png": drawn.png}
