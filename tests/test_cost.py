"""What requests cost (issue 30): every request the fake OpenAI server sees is priced by the table
and charged to its user; /usage, `relaybot status` and the Prometheus counter show it; [limits]
usd_per_day holds a user's messages until the budget resets. Through the real App and the real
Telegram adapter against the fake Bot API; synchronisation by the fakes' recorded calls."""

from __future__ import annotations

import io
import json
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from bot._operate import status
from bot.app import App
from bot.config import Config
from bot.doctor import _prices
from engine.models import NANO, Amount, Price, Prices, Usage, dollars
from engine.models._pricing import cost_nano
from tests.fakes.media import voice
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.fakes.telegram_server import FakeTelegram
from tests.ports import free_port
from tests.test_operating import scrape, value

DM = 1001
PRICE = {"input_per_mtok": 2.0, "cached_input_per_mtok": 0.5, "output_per_mtok": 8.0}


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


@pytest.fixture
def telegram(make_config: Callable[..., Config], tg: FakeTelegram) -> Callable[..., Any]:
    def config(**sections: Any) -> Config:
        section = {"enabled": True, "token": tg.token, "api_base_url": tg.base_url}
        section |= {"allowed_users": ["*"], "poll_timeout_s": 5}
        return make_config(telegram=section, **sections)

    return config


def to(chat: int) -> Callable[[dict[str, Any]], bool]:
    return lambda p: p.get("chat_id") == chat


def usage(prompt: int, completion: int, cached: int = 0) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
    }


async def test_usage_shows_what_the_requests_the_fake_saw_cost_by_the_price_table(
    telegram: Any, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    port = free_port()
    draw = tool_call("generate_image", {"prompt": "a cat"}, usage=usage(1000, 50, 400))
    replies = [(draw, 1000, 50, 400), (text("Here.", usage=usage(1500, 20)), 1500, 20, 0)]
    llm.script(*(r for r, *_ in replies))
    llm.script_transcription("draw a cat")
    media = {"transcription_model": "whisper-1", "speech_model": "tts-1", "image_model": "dall-e-3"}
    config = telegram(
        media=media,
        pricing={"fake-model": PRICE},
        metrics={"listen": f"127.0.0.1:{port}"},
    )
    async with App(config) as app:
        tg.inject_message(DM, DM, voice=tg.upload_voice(voice("cat"), duration=30))
        await tg.wait_for_call("sendVoice", to(DM))
        await app.dispatcher.wait_idle("telegram", str(DM))
        tg.inject_message(DM, DM, "/usage")
        shown = await tg.wait_for_call("sendMessage", to(DM), count=3)
        scraped = await scrape(port)
    # The price table, applied by hand to what the fake saw and answered.
    chat = (
        sum(
            ((p - c) * PRICE["input_per_mtok"] + c * PRICE["cached_input_per_mtok"])
            + o * PRICE["output_per_mtok"]
            for _, p, o, c in replies
        )
        / 1e6
    )
    assert len(llm.requests) == 2 and len(llm.transcriptions) == 1
    heard = 30 / 60 * 0.006  # whisper-1: $0.006 a minute
    (spoken,) = llm.speech
    said = len(spoken.input) * 15.00 / 1e6  # tts-1: $15 a million characters
    drawn = len(llm.image_requests) * 0.040  # dall-e-3, 1024x1024
    expected = chat + heard + said + drawn
    spent = await _spent(config, str(DM))
    assert spent == pytest.approx(expected * NANO, abs=5)
    assert dollars(spent) in shown.params["text"]
    assert shown.params["text"].startswith("Today: 2,570 tokens, 1 turns, 1 tool calls, $0.048")
    assert "This month: 2,570 tokens" in shown.params["text"]
    assert value(scraped, "relaybot_cost_usd_total") == pytest.approx(expected)
    assert value(scraped, "relaybot_cost_usd_total", model="dall-e-3") == pytest.approx(0.04)
    out = io.StringIO()
    await status(config, as_json=False, out=out)
    report = out.getvalue()
    assert f"spent today (UTC), {dollars(spent)} in all; models: 4" in report
    assert "  dall-e-3  $0.040: 1 request, 1 picture\n" in report
    assert "  whisper-1  $0.0030: 1 request, 30 s heard\n" in report
    assert (
        f"  fake-model  {dollars(round(chat * NANO))}: 2 requests, 2,500 tokens in, 70 out\n"
        in report
    )
    out = io.StringIO()
    await status(config, as_json=True, out=out)
    models = {m["of"]: m["nano_usd"] for m in json.loads(out.getvalue())["spent_today"]}
    assert sum(models.values()) == spent


async def _spent(config: Config, user: str) -> int:
    with sqlite3.connect(config.storage.resolved_path()) as db:
        (nano,) = db.execute("SELECT SUM(nano_usd) FROM spend WHERE user_id=?", (user,)).fetchone()
    return int(nano)


async def test_usd_per_day_holds_a_user_at_the_limit_and_loses_nothing(
    telegram: Any, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    config = telegram(
        pricing={"fake-model": {"input_per_mtok": 1000, "output_per_mtok": 1000}},
        limits={"usd_per_day": 0.01},
    )
    async with App(config) as app:
        tg.inject_message(DM, DM, "hello")  # about 30 tokens: $0.03, past the limit
        await tg.wait_for_call("sendMessage", to(DM))
        await app.dispatcher.wait_idle("telegram", str(DM))
        tg.inject_message(DM, DM, "one more question")
        told = await tg.wait_for_call("sendMessage", to(DM), count=2)
        tg.inject_message(DM, DM, "and another")
        tg.inject_message(DM, DM, "/usage")
        usage_reply = await tg.wait_for_call("sendMessage", to(DM), count=3)
        tg.inject_message(2002, 2002, "someone else")  # other users go on
        await tg.wait_for_call("sendMessage", to(2002))
    text_told = told.params["text"]
    assert "reached today's spending limit of $0.01" in text_told
    assert "kept your message" in text_told and "00:00 UTC" in text_told
    assert "Your daily spending limit: $0.01." in usage_reply.params["text"]
    sent = [c.params["text"] for c in tg.calls_of("sendMessage") if c.params["chat_id"] == DM]
    assert sum("spending limit of" in t for t in sent) == 1  # told once
    assert len(llm.requests) == 2  # hello, and the other user's
    midnight = (int(time.time()) // 86_400 + 1) * 86_400
    path = config.storage.resolved_path()
    with sqlite3.connect(path) as db:
        held = db.execute(
            "SELECT text, hold_until FROM inbox WHERE state='queued' ORDER BY id"
        ).fetchall()
    assert held == [("one more question", midnight), ("and another", midnight)]
    # The day ends (the holds come due): a restart answers both, in one turn.
    with sqlite3.connect(path) as db:
        db.execute("UPDATE inbox SET hold_until=? WHERE state='queued'", (time.time() - 1,))
        db.execute("DELETE FROM spend")  # a new day's figures
    llm.script(text("Answering both now."))
    async with App(config):
        await tg.wait_for_call("sendMessage", lambda p: p.get("text") == "Answering both now.")
    last = str(llm.requests[-1]["messages"])
    assert "one more question" in last and "and another" in last


# -- the price table ----------------------------------------------------------------------------


def test_a_price_is_found_by_name_or_by_the_longest_listed_prefix() -> None:
    prices = Prices({"gpt-4o": Price(9.0, 9.0), "local": Price(0, 0)})
    assert prices.of("gpt-4o") == Price(9.0, 9.0)  # the config over the built-in price
    assert prices.of("gpt-4o-mini-2024-07-18") == Prices().of("gpt-4o-mini")
    assert prices.of("claude-sonnet-4-5-20250929") == Prices().of("claude-sonnet-4-5")
    assert prices.of("local:7b") == Price(0, 0)
    assert prices.of("gpt-4omega") is None and prices.of("qwen2.5") is None


def test_cached_and_written_prompt_tokens_have_their_own_prices() -> None:
    sonnet = Prices().of("claude-sonnet-4-5")
    assert sonnet is not None
    used = Usage(
        prompt_tokens=10_000, completion_tokens=1_000, cached_tokens=6_000, cache_write_tokens=2_000
    )
    # 2,000 fresh at $3, 6,000 read at $0.30, 2,000 written at $3.75, 1,000 out at $15 (per Mtok)
    assert cost_nano(sonnet, Amount(used)) == 6_000_000 + 1_800_000 + 7_500_000 + 15_000_000
    assert cost_nano(Price(per_image=0.04), Amount(images=2)) == 80_000_000
    assert dollars(48_215_000) == "$0.048" and dollars(1_270_000_000) == "$1.27"


def test_doctor_says_which_models_have_no_price(make_config: Callable[..., Config]) -> None:
    config = make_config(media={"speech_model": "tts-1", "image_model": "my-painter"})
    checks = {c.detail.split()[0]: c for c in _prices(config)}
    assert checks["priced:"].detail == "priced: tts-1"
    assert checks["fake-model"].status.name == "OK"  # it works, counting tokens
    assert "counted in tokens only" in checks["my-painter"].detail
    limited = make_config(limits={"usd_per_day": 1})
    checks = {c.detail.split()[0]: c for c in _prices(limited)}
    assert checks["fake-model"].status.name == "WARNING"
    assert "usd_per_day does not see them" in checks["fake-model"].detail
    assert '[pricing."fake-model"]' in (checks["fake-model"].fix or "")
    priced = make_config(pricing={"fake-model": PRICE, "my-painter": {"per_image": 0.01}})
    assert [c.detail for c in _prices(priced)] == ["priced: fake-model"]
