"""Pictures, files and voice in Telegram, end to end: the real App and python-telegram-bot against
the fake Bot API (getFile and file downloads) and the fake OpenAI server (image parts, audio
transcriptions). Synchronisation is by the fakes' recorded calls, never by sleeping."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from bot.app import App
from bot.config import Config
from tests.fakes.media import jpeg, png, voice
from tests.fakes.openai_server import FakeOpenAI, hold, images_in, text, tool_call
from tests.fakes.telegram_server import FakeTelegram
from tools import File, ToolResult, tool

DM = 1001


@tool
async def draw_chart(title: str) -> ToolResult:
    """Draw a chart."""
    return ToolResult.with_files(f"drew {title}", File(name="chart.png", data=png(title)))


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


@pytest.fixture
def config(make_config: Callable[..., Config], tg: FakeTelegram) -> Callable[..., Config]:
    def make(*, vision: bool = True, **sections: Any) -> Config:
        telegram = {"enabled": True, "token": tg.token, "api_base_url": tg.base_url}
        telegram |= {"allowed_users": ["*"], "poll_timeout_s": 5}
        return make_config(telegram=telegram, llm={"vision": vision}, **sections)

    return make


@asynccontextmanager
async def daemon(config: Config) -> AsyncIterator[App]:
    async with App(config, extra_tools=(draw_chart,)) as app:
        yield app


def to(chat: int) -> Callable[[dict[str, Any]], bool]:
    return lambda p: p.get("chat_id") == chat


def texts_to(tg: FakeTelegram, chat: int) -> list[str]:
    return [c.params["text"] for c in tg.calls_of("sendMessage") if c.params["chat_id"] == chat]


def user_content(body: dict[str, Any]) -> Any:
    return [m for m in body["messages"] if m["role"] == "user"][-1]["content"]


async def test_a_photo_with_a_caption_reaches_the_model_as_a_picture_and_its_text(
    config, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    # Telegram offers the photo in three sizes; the largest under the 10 kB limit is taken.
    sizes = [jpeg("small", 1_000), jpeg("medium", 6_000), jpeg("large", 40_000)]
    photo = tg.upload_photo(*sizes)
    llm.script(text("A red bicycle."))
    async with daemon(config(media={"max_image_mb": 0.01})):
        update = tg.inject_message(DM, DM, caption="what is this?", photo=photo)
        answer = await tg.wait_for_call("sendMessage", to(DM))
    assert answer.params["text"] == "A red bicycle."
    assert answer.params["reply_parameters"]["message_id"] == update["message"]["message_id"]
    content = user_content(llm.requests[0])
    assert content[0] == {"type": "text", "text": "what is this?"}
    assert images_in(llm.requests[0]) == [("image/jpeg", sizes[1])]
    assert tg.downloads == [photo[1]["file_id"]]


async def test_the_store_keeps_the_picture_reference_not_its_bytes(
    config, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    picture = png("keep-me-out-of-the-store", padding=2000)
    photo = tg.upload_photo(picture)
    cfg = config()
    async with daemon(cfg):
        tg.inject_message(DM, DM, caption="look", photo=photo)
        await tg.wait_for_call("sendMessage", to(DM))
    path = cfg.storage.resolved_path()
    assert b"keep-me-out-of-the-store" not in path.read_bytes()
    with sqlite3.connect(path) as db:
        (media,) = db.execute("SELECT media FROM messages WHERE role='user'").fetchone()
    assert photo[0]["file_id"] in media


async def test_a_csv_reaches_the_model_as_text_with_its_name(
    config, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    csv = "city,temp\nOslo,-3\nLima,24\n"
    document = tg.upload_document(csv.encode(), "weather.csv", "text/csv")
    async with daemon(config(vision=False)):
        tg.inject_message(DM, DM, caption="which is warmer?", document=document)
        await tg.wait_for_call("sendMessage", to(DM))
    content = user_content(llm.requests[0])
    assert isinstance(content, str)  # no picture: plain text
    assert content.startswith("which is warmer?\n\n[file weather.csv")
    assert "Oslo,-3\nLima,24" in content and content.endswith("[end of weather.csv]")


async def test_a_voice_note_reaches_the_model_as_its_transcript_shown_back_first(
    config, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    note = voice("monday")
    llm.script_transcription("What is on my calendar on Monday?")
    llm.script(text("Two meetings."))
    async with daemon(config(media={"transcription_model": "whisper-1"})):
        tg.inject_message(DM, DM, voice=tg.upload_voice(note, duration=4))
        await tg.wait_for_call("sendMessage", to(DM), count=2)
    assert texts_to(tg, DM) == ["🎤 “What is on my calendar on Monday?”", "Two meetings."]
    assert user_content(llm.requests[0]) == "What is on my calendar on Monday?"
    (heard,) = llm.transcriptions
    assert (heard.model, heard.filename, heard.data) == ("whisper-1", "voice.ogg", note)


async def test_over_a_limit_or_of_another_type_gets_a_short_reply_and_no_model_call(
    config, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    big = tg.upload_document(png("big", padding=30_000), "scan.png", "image/png")
    archive = tg.upload_document(b"PK\x03\x04" + b"\0" * 100, "backup.zip", "application/zip")
    long_note = tg.upload_voice(voice("long"), duration=900)
    media = {"max_image_mb": 0.01, "transcription_model": "whisper-1", "max_audio_s": 60}
    async with daemon(config(media=media)):
        tg.inject_message(DM, DM, caption="read this", document=big)
        tg.inject_message(DM, DM, document=archive)
        tg.inject_message(DM, DM, voice=long_note)
        await tg.wait_for_call("sendMessage", to(DM), count=3)
    too_big, zip_reply, too_long = texts_to(tg, DM)
    assert "scan.png is too large for me" in too_big and "the limit is 0.01 MB" in too_big
    assert "I can't read backup.zip (application/zip)" in zip_reply
    assert "text files (txt, md, csv, json, code)" in zip_reply
    assert "15:00 min long" in too_long and "1:00 min at most" in too_long
    assert llm.requests == [] and llm.transcriptions == []
    assert tg.calls_of("getFile") == []  # judged by the sizes Telegram gave: nothing fetched


async def test_without_vision_a_picture_gets_the_cannot_see_reply(
    config, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    async with daemon(config(vision=False)):
        tg.inject_message(DM, DM, caption="what's this?", photo=tg.upload_photo(jpeg("x")))
        tg.inject_message(DM, DM, "and hello")
        await tg.wait_for_call("sendMessage", to(DM), count=2)
    cannot_see, echoed = texts_to(tg, DM)
    assert "cannot see images" in cannot_see and echoed == "echo: and hello"
    assert len(llm.requests) == 1 and tg.calls_of("getFile") == []


async def test_voice_without_a_transcription_model_says_voice_is_off(
    config, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    async with daemon(config()):
        tg.inject_message(DM, DM, voice=tg.upload_voice(voice(), duration=3))
        reply = await tg.wait_for_call("sendMessage", to(DM))
    assert "Voice messages are not set up here" in reply.params["text"]
    assert llm.requests == [] and llm.transcriptions == []


async def test_an_album_is_one_turn(config, tg: FakeTelegram, llm: FakeOpenAI) -> None:
    first, second = png("first"), png("second")
    async with daemon(config()) as app:
        app.dispatcher.intake.albums.window_s = 2.0  # generous: the parts come in two polls here
        part = tg.inject_message(
            DM, DM, caption="compare", photo=tg.upload_photo(first), media_group_id="al1"
        )
        # The first part is handled (and confirmed to Telegram) before the second arrives.
        await tg.wait_for_call("getUpdates", lambda p: (p.get("offset") or 0) > part["update_id"])
        tg.inject_message(DM, DM, photo=tg.upload_photo(second), media_group_id="al1")
        await tg.wait_for_call("sendMessage", to(DM))
        tg.inject_message(DM, DM, "thanks")  # a barrier: the album's turn is over
        await tg.wait_for_call("sendMessage", to(DM), count=2)
    album, thanks = llm.requests
    assert images_in(album) == [("image/png", first), ("image/png", second)]
    assert [m["role"] for m in album["messages"]] == ["system", "user"]  # one turn, one message
    assert len(images_in(thanks)) == 2  # still recent: sent again as pictures


async def test_a_tool_picture_is_sent_with_sendphoto_before_the_answer(
    config, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    llm.script(tool_call("draw_chart", {"title": "sales"}), text("Here is your chart."))
    async with daemon(config()):
        tg.inject_message(DM, DM, "chart my sales")
        answer = await tg.wait_for_call("sendMessage", to(DM))
    (photo,) = tg.calls_of("sendPhoto")
    assert photo.at <= answer.at and answer.params["text"] == "Here is your chart."
    sent = max(mid for chat, mid in tg.messages if chat == DM and "photo" in tg.messages[chat, mid])
    assert tg.document(DM, sent) == ("chart.png", png("sales"))
    told = next(m for m in llm.requests[1]["messages"] if m["role"] == "tool")["content"]
    assert told.startswith("drew sales\n[Sent to the user as files: chart.png (image/png")


async def test_a_photo_is_answered_exactly_once_across_a_restart(
    config, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    picture = png("restart")
    photo = tg.upload_photo(picture)
    cfg = config(engine={"shutdown_grace_s": 0})
    llm.script(hold(asyncio.Event(), text("never sent")))
    async with daemon(cfg):
        tg.inject_message(DM, DM, caption="what is it?", photo=photo)
        await llm.wait_requests(1)  # the daemon stops while the model has the request
    llm.script(text("A tiny picture."))
    async with daemon(cfg) as app:
        await tg.wait_for_call("sendMessage", to(DM))
        await app.dispatcher.wait_idle("telegram", str(DM))
    async with daemon(cfg) as app:  # a third start has nothing left to answer
        await app.dispatcher.wait_idle("telegram", str(DM))
    assert texts_to(tg, DM) == ["A tiny picture."]
    assert len(llm.requests) == 2
    assert images_in(llm.requests[1]) == [("image/png", picture)]
    assert tg.downloads == [photo[0]["file_id"]] * 2  # fetched again by its file_id


async def test_a_static_sticker_is_a_picture_and_an_animated_one_is_not_read(
    config, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    webp = b"RIFF\x24\x00\x00\x00WEBPVP8 " + b"\0" * 32
    kept = tg.upload_document(webp, "sticker.webp", "image/webp")
    shape = {"type": "regular", "width": 512, "height": 512, "is_video": False}
    static = {k: kept[k] for k in ("file_id", "file_unique_id", "file_size")} | shape
    async with daemon(config()):
        tg.inject_message(DM, DM, sticker=static | {"file_id": "anim", "is_animated": True})
        await tg.wait_for_call("sendMessage", to(DM))
        tg.inject_message(DM, DM, sticker=static | {"is_animated": False})
        await tg.wait_for_call("sendMessage", to(DM), count=2)
    refused, answered = texts_to(tg, DM)
    assert "I can't read sticker (application/x-tgsticker)" in refused
    assert answered == "echo: (empty message)"  # a picture alone is sent with a text part
    assert images_in(llm.requests[0]) == [("image/webp", webp)]
