"""Answers streamed as drafts in private Telegram chats (issue 33), end to end: the real daemon
and python-telegram-bot against the fake Bot API, which takes sendMessageDraft in private chats
only, as Telegram does. A private chat sees growing drafts and the answer sent once; a group, a
server without drafts, or a draft refused halfway, streams by sending and editing a message as
before, and the whole answer arrives. Synchronisation is on recorded calls, never on sleeps."""

from __future__ import annotations

import functools
import itertools
from collections.abc import AsyncIterator, Callable

import pytest
from telegram import Bot
from telegram.error import BadRequest

from bot.config import Config
from channels.telegram import TelegramChannel
from channels.telegram._drafts import tail
from tests.fakes.openai_server import FakeOpenAI, text
from tests.fakes.telegram_server import FakeTelegram, parse_html
from tests.test_telegram import daemon, telegram_config

DM = 1001
GROUP = -2002
ANSWER = "Drafts **work**: " + " ".join(f"word{i}" for i in range(50)) + " <end>"


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


@pytest.fixture
def config(
    make_config: Callable[..., Config], tg: FakeTelegram, llm: FakeOpenAI
) -> Callable[..., Config]:
    llm.stream_chunk_chars, llm.stream_chunk_delay_s = 8, 0.04  # about 1.8 s of streaming
    return functools.partial(telegram_config, make_config, tg, llm={"stream": True})


def final(p: dict[str, object]) -> bool:
    return p.get("parse_mode") == "HTML"


async def test_a_private_chat_streams_drafts_and_the_answer_is_sent_once(
    config, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    llm.script(text(ANSWER))
    async with daemon(config()):
        tg.inject_message(DM, DM, "stream it")
        sent = await tg.wait_for_call("sendMessage", final)
    drafts = tg.calls_of("sendMessageDraft")
    assert len(drafts) >= 2 and all(c.status == 200 for c in drafts)
    assert len({c.params["draft_id"] for c in drafts}) == 1  # one draft, animated
    texts = [c.params["text"] for c in drafts]
    assert all(b.startswith(a) and a != b for a, b in itertools.pairwise(texts))
    assert all("parse_mode" not in c.params for c in drafts)  # growing text: plain
    assert ANSWER.startswith(texts[-1])
    span = drafts[-1].at - drafts[0].at
    assert len(drafts) <= span / TelegramChannel.capabilities.edit_interval_s + 2
    assert all(c.at < sent.at for c in drafts)  # no preview after the answer
    assert tg.calls_of("sendMessage") == [sent]  # once, whole, formatted
    assert tg.calls_of("editMessageText") == []
    assert sent.params["text"].startswith("Drafts <b>work</b>")
    assert tg.chat_texts(DM) == [parse_html(sent.params["text"])]


async def test_an_answer_longer_than_a_message_drafts_its_newest_part_then_is_sent_in_parts(
    config, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    answer = " ".join(f"w{i:04d}" for i in range(1400))  # 8399 characters: three messages
    llm.stream_chunk_chars, llm.stream_chunk_delay_s = 700, 0.15  # 1.8 s: a draft past 4096
    llm.script(text(answer))
    async with daemon(config()):
        tg.inject_message(DM, DM, "a long one")
        await tg.wait_for_call("sendMessage", count=3)
    drafts = [c.params["text"] for c in tg.calls_of("sendMessageDraft")]
    assert drafts and all(len(t) <= 4096 for t in drafts)
    assert any(t.startswith("…") for t in drafts)  # past the limit: the newest part
    texts = tg.chat_texts(DM)
    assert len(texts) == 3 and " ".join(texts) == answer
    assert tg.calls_of("editMessageText") == []


async def test_a_topic_of_a_private_chat_gets_its_drafts(
    config, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    topic = tg.open_topic(DM, "Mine", chat_type="private")
    llm.script(text(ANSWER))
    async with daemon(config()):
        tg.inject_message(DM, DM, "stream it here", topic=topic)
        await tg.wait_for_call("sendMessage", final)
    assert {c.params.get("message_thread_id") for c in tg.calls_of("sendMessageDraft")} == {topic}
    assert len(tg.topic_texts(DM, topic)) == 1


async def test_a_group_streams_by_edits(config, tg: FakeTelegram, llm: FakeOpenAI) -> None:
    llm.script(text(ANSWER))
    async with daemon(config(group_mode="all")):
        tg.inject_message(GROUP, 7, "stream it", chat_type="group")
        await tg.wait_for_call("editMessageText", final)
    assert tg.calls_of("sendMessageDraft") == []  # Telegram takes none outside private chats
    assert len(tg.calls_of("sendMessage")) == 1 and len(tg.calls_of("editMessageText")) >= 2
    assert tg.chat_texts(GROUP)[0].endswith("word49 <end>")


async def test_a_server_without_drafts_streams_by_edits_and_is_not_asked_again(
    config, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    tg.drafts_supported = False
    llm.script(text(ANSWER), text("Second answer."))
    async with daemon(config()):
        tg.inject_message(DM, DM, "stream it")
        await tg.wait_for_call("editMessageText", final)
        tg.inject_message(DM, DM, "and again")
        await tg.wait_for_call("editMessageText", lambda p: p["text"] == "Second answer.")
    (refused,) = tg.calls_of("sendMessageDraft")
    assert refused.status == 404
    assert tg.chat_texts(DM)[0].endswith("word49 <end>")
    assert tg.chat_texts(DM)[1] == "Second answer."


@pytest.mark.parametrize("status", [400, 502])
async def test_a_draft_refused_halfway_falls_back_without_losing_the_answer(
    config, tg: FakeTelegram, llm: FakeOpenAI, status: int
) -> None:
    llm.script(text(ANSWER))
    async with daemon(config()):
        tg.inject_message(DM, DM, "stream it")
        await tg.wait_for_call("sendMessageDraft")
        tg.fail_next("sendMessageDraft", status, None)  # the chat refuses, or Telegram fails
        await tg.wait_for_call("editMessageText", final)
    drafts = tg.calls_of("sendMessageDraft")
    assert [c.status for c in drafts] == [200, status]
    assert len(tg.calls_of("sendMessage")) == 1  # the message the rest streams in
    assert tg.chat_texts(DM)[0].startswith("Drafts work")
    assert tg.chat_texts(DM)[0].endswith("word49 <end>")


async def test_the_fake_takes_drafts_in_private_chats_only(tg: FakeTelegram) -> None:
    async with Bot(tg.token, base_url=tg.base_url) as bot:
        assert await bot.send_message_draft(DM, 7, "typing…")
        with pytest.raises(BadRequest, match=r"(?i)textdraft_peer_invalid"):
            await bot.send_message_draft(GROUP, 7, "typing…")
    assert tg.drafts == [(DM, 7, "typing…")] and tg.chat_texts(DM) == []


def test_a_long_draft_shows_its_newest_part_within_telegrams_limit() -> None:
    assert tail("short") == "short"
    long = "😀" * 3000  # two UTF-16 units each
    shown = tail(long)
    assert shown.startswith("…") and len(shown.encode("utf-16-le")) // 2 <= 4096
    assert long.endswith(shown[1:])
