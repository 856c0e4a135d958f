"""Answers spoken back (issue 30): a voice question gets its text answer and then a voice
answer, through the real App, python-telegram-bot and discord.py against the fake Bot API, the
fake Discord and the fake OpenAI server's /audio/speech (which answers real Ogg/Opus bytes).
Synchronisation is by the fakes' recorded calls, never by sleeping."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from bot.app import App
from bot.config import Config
from engine.chat._turns._speech import REST_IN_TEXT, speakable
from tests.fakes.discord_server import Call, FakeDiscord
from tests.fakes.media import ogg_opus_seconds, voice
from tests.fakes.openai_media import SPEECH_OGG
from tests.fakes.openai_server import FakeOpenAI, error, text
from tests.fakes.telegram_server import FakeTelegram

DM = 1001
SPEECH = {"transcription_model": "whisper-1", "speech_model": "tts-1", "speech_voice": "nova"}


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


@pytest.fixture
def telegram(make_config: Callable[..., Config], tg: FakeTelegram) -> Callable[..., Any]:
    @contextlib.asynccontextmanager
    async def run(**media: Any) -> AsyncIterator[App]:
        section = {"enabled": True, "token": tg.token, "api_base_url": tg.base_url}
        section |= {"allowed_users": ["*"], "poll_timeout_s": 5}
        async with App(make_config(telegram=section, media=SPEECH | media)) as app:
            yield app

    return run


def to(chat: int) -> Callable[[dict[str, Any]], bool]:
    return lambda p: p.get("chat_id") == chat


def texts_to(tg: FakeTelegram, chat: int) -> list[str]:
    return [c.params["text"] for c in tg.calls_of("sendMessage") if c.params["chat_id"] == chat]


async def test_a_voice_question_gets_the_text_then_a_playable_voice_note_on_telegram(
    telegram: Any, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    llm.script_transcription("What is on today?")
    llm.script(text("**Two** meetings: see [the calendar](https://cal.example/today)."))
    async with telegram():
        question = tg.inject_message(DM, DM, voice=tg.upload_voice(voice("q"), duration=3))
        spoken = await tg.wait_for_call("sendVoice", to(DM))
    assert texts_to(tg, DM)[-1].startswith("<b>Two</b> meetings")  # the text came first
    assert spoken.at > tg.calls_of("sendMessage")[-1].at
    assert spoken.params["reply_parameters"]["message_id"] == question["message"]["message_id"]
    (asked,) = llm.speech
    assert (asked.model, asked.voice, asked.response_format) == ("tts-1", "nova", "opus")
    assert asked.input == "Two meetings: see the calendar."  # no Markdown, no URL read aloud
    (message_id,) = [m for (chat, m), msg in tg.messages.items() if chat == DM and "voice" in msg]
    name, audio = tg.document(DM, message_id)
    assert name == "answer.ogg" and audio == SPEECH_OGG
    assert ogg_opus_seconds(audio) == pytest.approx(0.6)  # a player would play it


async def test_a_typed_question_is_answered_in_text_unless_the_chat_asks_always(
    telegram: Any, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    async with telegram():
        tg.inject_message(DM, DM, "hello")
        await tg.wait_for_call("sendMessage", to(DM))
        assert llm.speech == [] and tg.calls_of("sendVoice") == []
        tg.inject_message(DM, DM, "/settings voice always")
        saved = await tg.wait_for_call("sendMessage", to(DM), count=2)
        assert "Voice replies: always" in saved.params["text"]
        tg.inject_message(DM, DM, "and now?")
        await tg.wait_for_call("sendVoice", to(DM))
        tg.inject_message(DM, DM, "/settings voice never")
        await tg.wait_for_call("sendMessage", to(DM), count=4)
        tg.inject_message(DM, DM, voice=tg.upload_voice(voice("n"), duration=2))
        await tg.wait_for_call("sendMessage", to(DM), count=6)  # the transcript, the answer
    assert [s.input for s in llm.speech] == ["echo: and now?"]
    assert len(tg.calls_of("sendVoice")) == 1


async def test_a_long_answer_is_spoken_up_to_the_limit_and_says_the_rest_is_written(
    telegram: Any, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    long = " ".join(f"Point {i} is worth hearing." for i in range(60))
    llm.script(text(long))
    async with telegram(max_speech_chars=200):
        tg.inject_message(DM, DM, voice=tg.upload_voice(voice("l"), duration=2))
        await tg.wait_for_call("sendVoice", to(DM))
    assert long in texts_to(tg, DM)  # the text is whole
    (asked,) = llm.speech
    assert len(asked.input) <= 200 and asked.input.endswith(f"hearing. {REST_IN_TEXT}")


async def test_a_speech_failure_leaves_the_text_and_is_logged_once(
    telegram: Any, tg: FakeTelegram, llm: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    llm.script_speech(error(400, "no such voice"), error(400, "no such voice"))
    caplog.set_level(logging.DEBUG, "engine.chat._turns._speech")
    async with telegram():
        for n in range(2):
            tg.inject_message(DM, DM, voice=tg.upload_voice(voice(str(n)), duration=2))
            await tg.wait_for_call("sendMessage", to(DM), count=2 * (n + 1))
        tg.inject_message(DM, DM, voice=tg.upload_voice(voice("ok"), duration=2))
        await tg.wait_for_call("sendVoice", to(DM))
    assert texts_to(tg, DM)[1] == "echo: transcript of voice.ogg"
    failures = [r for r in caplog.records if "could not speak" in r.getMessage()]
    assert [r.levelno for r in failures] == [logging.WARNING, logging.DEBUG]
    assert any("works again" in r.getMessage() for r in caplog.records)


def test_what_is_read_aloud() -> None:
    assert speakable("# Title\n\n`code` and *this*", 100) == ("Title\ncode and this", False)
    first = "A first sentence, long enough to keep."
    spoken, cut = speakable(f"{first} " + "word " * 100, 100)
    assert cut and spoken == f"{first} {REST_IN_TEXT}"
    spoken, cut = speakable("word " * 100, 60)
    assert cut and spoken.endswith(f"word… {REST_IN_TEXT}") and len(spoken) <= 60


# -- Discord --------------------------------------------------------------------------------

ALICE, DISCORD_DM = 4001, 3001


async def test_a_voice_question_gets_an_audio_attachment_on_discord(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    async with FakeDiscord(guilds={}, users={ALICE: "Alice"}) as fake:
        discord = {"enabled": True, "token": fake.token, "api_base_url": fake.api_base_url}
        config = make_config(discord=discord | {"allowed_users": [ALICE]}, media=SPEECH)
        note = fake.upload(voice("d"), "voice-message.ogg", "audio/ogg", duration=2.0)
        llm.script(text("Sure."))
        async with App(config):
            await fake.inject_message(DISCORD_DM, ALICE, "", attachments=[note])
            upload = await fake.wait_for_call(
                "POST", rf"/channels/{DISCORD_DM}/messages", lambda c: bool(c.files)
            )
        answer = _content(fake, "Sure.")
        assert upload.files == {"answer.ogg": SPEECH_OGG} and answer.at <= upload.at
        (shown,) = [
            m
            for m in fake.channel_messages(DISCORD_DM)
            if any(a["filename"] == "answer.ogg" for a in m["attachments"])
        ]
        played = fake.attachment(int(shown["id"]), "answer.ogg")
        assert ogg_opus_seconds(played) == pytest.approx(0.6)


def _content(fake: FakeDiscord, expected: str) -> Call:
    calls = fake.calls_to("POST", rf"/channels/{DISCORD_DM}/messages")
    return next(c for c in calls if (c.json or {}).get("content") == expected)
