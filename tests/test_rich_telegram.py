"""Rich answers on Telegram (issue 44), end to end: the real daemon and python-telegram-bot's raw
call against the fake Bot API, which checks every rich message against the spec (10.1 and its
10.2/10.3 overlay) and Telegram's limits. A table answer arrives as one rich message and streams
as rich drafts in private; a plain answer stays a plain message; a long one is cut between blocks;
a refused rich message arrives once as HTML; a server without rich messages is asked once.
Synchronisation is on recorded calls, never on sleeps."""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator, Callable

import pytest

from bot.config import Config
from tests.fakes import telegram_rich, telegram_spec
from tests.fakes.openai_server import FakeOpenAI, text
from tests.fakes.telegram_server import FakeTelegram
from tests.test_telegram import daemon, telegram_config

DM = 1001
GROUP = -2002
STREAM_WAIT_S = 20.0  # a stream of about 2.4 s, on a loaded machine
TABLE = """## Prices

| Plan | Price | Seats |
|:-----|------:|:-----:|
| Free | 0 € | 1 |
| Team | 12 € | 10 |

1. Pick a plan.
2. Pay with `card`.

```sh
relaybot run
```"""


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


@pytest.fixture
def config(make_config: Callable[..., Config], tg: FakeTelegram) -> Callable[..., Config]:
    return functools.partial(telegram_config, make_config, tg)


def blocks_of(call_params: dict[str, object]) -> list[dict[str, object]]:
    rich = call_params["rich_message"]
    return list((json.loads(rich) if isinstance(rich, str) else rich)["blocks"])  # type: ignore[index]


async def test_a_table_answer_arrives_as_one_rich_message(
    config, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    llm.script(text(TABLE))
    async with daemon(config(group_mode="all")):
        tg.inject_message(GROUP, 7, "what does it cost?", chat_type="group")
        sent = await tg.wait_for_call("sendRichMessage")
    assert sent.status == 200
    kinds = [b["type"] for b in blocks_of(sent.params)]
    assert kinds == ["heading", "table", "list", "pre"]
    table = blocks_of(sent.params)[1]
    assert [c["align"] for c in table["cells"][0]] == ["left", "right", "center"]  # type: ignore[index]
    assert all(c["is_header"] for c in table["cells"][0])  # type: ignore[index]
    assert tg.calls_of("sendMessage") == []  # the answer is not also sent as HTML
    (shown,) = tg.chat_texts(GROUP)
    assert "Team | 12 € | 10" in shown and "1. Pick a plan." in shown
    assert "relaybot run" in shown


async def test_a_plain_answer_stays_a_plain_message(
    config, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    llm.script(text("It costs **12 €** a month.\n\n- one seat\n- ten seats"))
    async with daemon(config()):
        tg.inject_message(DM, DM, "how much?")
        sent = await tg.wait_for_call("sendMessage")
    assert tg.calls_of("sendRichMessage") == []
    assert sent.params["text"].startswith("It costs <b>12 €</b> a month.")


async def test_a_refused_rich_message_arrives_once_as_html(
    config, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    tg.refuse_rich = "Bad Request: RICH_MESSAGE_FORBIDDEN"
    llm.script(text(TABLE), text(TABLE))
    async with daemon(config(group_mode="all")):
        tg.inject_message(GROUP, 7, "what does it cost?", chat_type="group")
        html = await tg.wait_for_call("sendMessage")
        tg.inject_message(GROUP, 7, "and again?", chat_type="group")
        await tg.wait_for_call("sendMessage", count=2)
    refused = tg.calls_of("sendRichMessage")
    assert len(refused) == 2 and {c.status for c in refused} == {400}  # asked each time
    assert html.params["parse_mode"] == "HTML" and html.params["text"].startswith("<b>Prices</b>")
    first, second = tg.chat_texts(GROUP)
    assert first == second and "Team | 12 €" in first  # whole, once each


async def test_a_server_without_rich_messages_is_asked_once(
    config, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    tg.rich_supported = False
    llm.script(text(TABLE), text(TABLE))
    async with daemon(config()):
        tg.inject_message(DM, DM, "what does it cost?")
        await tg.wait_for_call("sendMessage")
        tg.inject_message(DM, DM, "and again?")
        await tg.wait_for_call("sendMessage", count=2)
    (asked,) = tg.calls_of("sendRichMessage")
    assert asked.status == 404
    assert len(tg.chat_texts(DM)) == 2


async def test_a_long_rich_answer_is_cut_between_blocks(
    config, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    sections = [f"## Part {i}\n\n" + " ".join(f"w{i}x{j}" for j in range(300)) for i in range(4)]
    llm.script(text("\n\n".join(sections)))  # four headings of about 2,000 characters each
    async with daemon(config()):
        tg.inject_message(DM, DM, "tell me everything")
        await tg.wait_for_call("sendRichMessage", count=2)
    parts = [blocks_of(c.params) for c in tg.calls_of("sendRichMessage")]
    assert len(parts) == 2 and all(c.status == 200 for c in tg.calls_of("sendRichMessage"))
    headings = [b["text"] for blocks in parts for b in blocks if b["type"] == "heading"]
    assert headings == ["Part 0", "Part 1", "Part 2", "Part 3"]  # none cut, none lost
    assert all(b["type"] == "heading" for b in (p[0] for p in parts))  # cut before a block


async def test_a_private_chat_streams_rich_drafts_then_sends_the_answer_once(
    make_config: Callable[..., Config], tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    llm.stream_chunk_chars, llm.stream_chunk_delay_s = 5, 0.06  # about 2.4 s of streaming
    llm.script(text(TABLE))
    async with daemon(telegram_config(make_config, tg, llm={"stream": True})):
        tg.inject_message(DM, DM, "what does it cost?")
        sent = await tg.wait_for_call("sendRichMessage", timeout=STREAM_WAIT_S)
    rich_drafts = tg.rich_drafts
    assert len(rich_drafts) >= 2 and len({d for _, d, _ in rich_drafts}) == 1
    assert any(b["type"] == "table" for _, _, blocks in rich_drafts for b in blocks)
    assert all(c.at < sent.at for c in tg.calls_of("sendRichMessageDraft"))
    assert tg.calls_of("sendMessage") == [] and len(tg.chat_texts(DM)) == 1


async def test_a_group_streams_by_edits_and_ends_rich(
    make_config: Callable[..., Config], tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    llm.stream_chunk_chars, llm.stream_chunk_delay_s = 12, 0.04
    llm.script(text(TABLE))
    config = telegram_config(make_config, tg, llm={"stream": True}, group_mode="all")
    async with daemon(config):
        tg.inject_message(GROUP, 7, "what does it cost?", chat_type="group")
        final = await tg.wait_for_call(
            "editMessageText", lambda p: "rich_message" in p, timeout=STREAM_WAIT_S
        )
    assert final.status == 200 and tg.calls_of("sendRichMessage") == []
    (shown,) = tg.chat_texts(GROUP)
    assert "Team | 12 € | 10" in shown


@pytest.mark.parametrize(
    ("rich", "words"),
    [
        ({"blocks": [{"type": "paragraph", "text": "x"}], "html": "<p>x</p>"}, "exactly one"),
        ({"blocks": [{"type": "marquee", "text": "x"}]}, "type must be"),
        ({"blocks": [{"type": "heading", "text": "x"}]}, "size"),
        ({"blocks": [{"type": "heading", "text": "x", "size": 9}]}, "1-6"),
        ({"blocks": [{"type": "thinking", "text": "…"}]}, "drafts"),
        ({"blocks": [{"type": "table", "cells": [[{"align": "up", "valign": "top"}]]}]}, "align"),
        ({"blocks": [{"type": "paragraph", "text": "x" * 32_769}]}, "TOO_LONG"),
        ({"blocks": [{"type": "paragraph", "text": {"type": "blink", "text": "x"}}]}, "text"),
    ],
)
async def test_the_fake_refuses_a_malformed_rich_message(
    tg: FakeTelegram, rich: dict[str, object], words: str
) -> None:
    from telegram import Bot
    from telegram.error import BadRequest

    async with Bot(tg.token, base_url=tg.base_url) as bot:
        with pytest.raises(BadRequest, match=f"(?i){words}"):
            await bot.do_api_request("sendRichMessage", {"chat_id": DM, "rich_message": rich})
    assert tg.messages == {}


@pytest.mark.parametrize(
    "markdown",
    [
        TABLE,
        "# a *b* ~~c~~ [d](https://e.org) [f](javascript:x) ![g](https://h.org/i.png)\n\n---",
        "> quoted\n>\n> ```\n> code\n> ```\n\n1) one\n   1. nested\n\n<div>raw</div>",
        "| a | b | c | d | e |\n|---|---|---|---|---|\n| `1` | **2** | | 4 | 5 |",
        "\n\n".join(  # twelve lists of 60 steps: 1,452 blocks, cut into four parts
            f"1{'.)'[j % 2]} " + f"\n1{'.)'[j % 2]} ".join(f"s{i}" for i in range(60))
            for j in range(12)
        ),
    ],
)
def test_every_rich_part_is_one_the_api_takes(markdown: str) -> None:
    from channels.telegram._rich import BLOCKS_MAX, count_blocks, rich_parts

    parts = rich_parts(markdown)
    assert parts
    for part in parts:
        rich = {"blocks": json.loads(part.blocks)}
        assert count_blocks(rich["blocks"]) <= BLOCKS_MAX
        telegram_spec.check("sendRichMessage", {"chat_id": DM, "rich_message": rich})
        telegram_rich.check(rich, draft=False)


async def test_a_chat_that_refuses_rich_drafts_gets_plain_ones_and_the_answer_once(
    make_config: Callable[..., Config], tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    tg.refuse_rich = "Bad Request: RICH_MESSAGE_FORBIDDEN"
    llm.stream_chunk_chars, llm.stream_chunk_delay_s = 5, 0.06
    llm.script(text(TABLE))
    async with daemon(telegram_config(make_config, tg, llm={"stream": True})):
        tg.inject_message(DM, DM, "what does it cost?")
        sent = await tg.wait_for_call("sendMessage", timeout=STREAM_WAIT_S)
    (refused,) = tg.calls_of("sendRichMessageDraft")  # asked once for this chat
    assert refused.status == 400
    assert tg.drafts and all(c.at < sent.at for c in tg.calls_of("sendMessageDraft"))
    assert [c.status for c in tg.calls_of("sendRichMessage")] == [400]
    assert sent.params["text"].startswith("<b>Prices</b>") and len(tg.chat_texts(DM)) == 1
