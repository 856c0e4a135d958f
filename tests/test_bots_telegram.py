"""Other bots in a Telegram group (issue 44; bot-to-bot messages, Bot API 10.0): answered only
where ``[access] bots`` lets, and held by the loop guard. The real App and python-telegram-bot
against the fake Bot API; the other bot is played by the fake itself, answering every message
relaybot sends to the group at once, as a second bot that always replies would."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from bot.app import App
from bot.config import Config
from engine import InboundMessage, Quote
from engine.chat import BotSettings
from engine.chat._access._bots import BotGuard
from tests.fakes.openai_server import FakeOpenAI, echo
from tests.fakes.telegram_server import BOT_USERNAME, Call, FakeTelegram
from tests.test_private_replies_telegram import tg

__all__ = ["tg"]  # the fixture

GROUP = -100800
ALICE = 7
PEER, PEER_NAME = 9000000001, "peer_bot"
STRANGER_BOT = 9000000002


@pytest.fixture
def config(make_config: Callable[..., Config], tg: FakeTelegram) -> Callable[..., Config]:
    def make(**access: Any) -> Config:
        telegram = {
            "enabled": True,
            "token": tg.token,
            "api_base_url": tg.base_url,
            "allowed_users": [str(ALICE)],
            "poll_timeout_s": 5,
        }
        return make_config(telegram=telegram, access=access)

    return make


def as_bot(update: dict[str, Any], user_id: int = PEER, username: str = PEER_NAME) -> None:
    """The queued message's author becomes a bot (the fake's users are people)."""
    update["message"]["from"] |= {"id": user_id, "is_bot": True, "username": username}


def peer_says(tg: FakeTelegram, text: str, reply_to: int | None = None) -> None:
    update = tg.inject_message(
        GROUP, PEER, f"@{BOT_USERNAME} {text}", chat_type="group", reply_to_message=reply_to
    )
    as_bot(update)


def peer_answers_everything(tg: FakeTelegram) -> list[int]:
    """The peer replies, mentioning relaybot, to each message relaybot sends to the group;
    returns the ids of those it answered."""
    answered: list[int] = []

    def listener(call: Call, result: Any) -> None:
        if call.method == "sendMessage" and result and result["chat"]["id"] == GROUP:
            answered.append(result["message_id"])
            peer_says(tg, f"thanks for: {result['text'][:40]}", reply_to=result["message_id"])

    tg.answer_listeners.append(listener)
    return answered


class Trips(logging.Handler):
    """The guard's trip lines, and an event set at each."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []
        self.seen = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if "loop guard tripped" in record.getMessage():
            self.lines.append(record.getMessage())
            self.seen.set()


@contextmanager
def watching_the_guard() -> Iterator[Trips]:
    handler = Trips()
    logger = logging.getLogger("engine.chat._access._bots")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


def to_group(p: dict[str, Any]) -> bool:
    return p.get("chat_id") == GROUP


async def test_two_bots_answering_each_other_stop_after_the_chain_limit(
    config, tg, llm: FakeOpenAI
) -> None:
    llm.default = echo
    peer_answers_everything(tg)
    cfg = config(bots=[f"telegram:@{PEER_NAME}"], bot_chain=3, bot_turns_per_minute=50)
    with watching_the_guard() as guard:
        async with App(cfg):
            tg.inject_message(GROUP, ALICE, f"@{BOT_USERNAME} greet the peer", chat_type="group")
            # Alice's answer, then three answers to the peer's replies; its fourth reply in a
            # row trips the guard.
            await asyncio.wait_for(guard.seen.wait(), 10)
            # A person speaks: answered; the peer's reply to that falls in the cool-down, and
            # is handled (dropped) before Alice's next message, in the chat's order.
            for n, words in ((5, "are you there?"), (6, "still there?")):
                tg.inject_message(GROUP, ALICE, f"@{BOT_USERNAME} {words}", chat_type="group")
                await tg.wait_for_call("sendMessage", to_group, count=n)
    assert len(llm.requests) == 6  # 1 + 3 for the peer + 2: never a fifth answer to the peer
    assert len([c for c in tg.calls_of("sendMessage") if to_group(c.params)]) == 6
    (line,) = guard.lines  # one line, for the trip only
    assert f"telegram:{GROUP}" in line and "in a row" in line


async def test_bots_not_listed_are_never_answered_nor_told_anything(
    config, tg, llm: FakeOpenAI
) -> None:
    llm.default = echo
    async with App(config(bots=[f"telegram:{PEER}"])):
        stranger = tg.inject_message(GROUP, STRANGER_BOT, f"@{BOT_USERNAME} hi", chat_type="group")
        as_bot(stranger, STRANGER_BOT, "stranger_bot")
        peer_says(tg, "hello from the peer")  # listed by id
        await tg.wait_for_call("sendMessage", to_group)
        tg.inject_message(GROUP, ALICE, f"@{BOT_USERNAME} and me?", chat_type="group")
        await tg.wait_for_call("sendMessage", to_group, count=2)
    texts = [c.params["text"] for c in tg.calls_of("sendMessage")]
    assert len(texts) == 2 and "hello from the peer" in texts[0] and "and me?" in texts[1]
    assert not any("user id" in t for t in texts)  # no refusal, no pairing code to a bot


def bot_message(n: int, *, answers_us: bool, chat: str = "-1") -> InboundMessage:
    quote = Quote("relay", "an earlier answer", by_bot=True) if answers_us else None
    return InboundMessage(
        "telegram",
        chat,
        str(PEER),
        "Peer",
        "hi",
        str(n),
        is_private=False,
        mentioned=True,
        username=PEER_NAME,
        quote=quote,
        from_bot=True,
    )


def test_the_guard_counts_bot_turns_per_minute_and_cools_down() -> None:
    now = [1000.0]
    settings = BotSettings(frozenset({f"telegram:@{PEER_NAME}"}), per_minute=2, cooldown_s=300)
    guard = BotGuard(lambda: settings, lambda: now[0])
    assert [guard.admit(bot_message(i, answers_us=False)) for i in range(3)] == [True, True, False]
    now[0] += 299  # still cooling down
    assert not guard.admit(bot_message(4, answers_us=False))
    now[0] += 2
    assert guard.admit(bot_message(5, answers_us=False))
    assert guard.admit(bot_message(6, answers_us=False, chat="-2"))  # another chat: its own
    now[0] += 61  # the minute has passed: two more
    assert guard.admit(bot_message(7, answers_us=False))
    # Not mentioned, or in private: never.
    private = bot_message(8, answers_us=False)
    assert not guard.admit(InboundMessage(**{**_fields(private), "is_private": True}))
    assert not guard.admit(InboundMessage(**{**_fields(private), "mentioned": False}))


def _fields(msg: InboundMessage) -> dict[str, Any]:
    return {name: getattr(msg, name) for name in InboundMessage.__slots__}  # type: ignore[attr-defined]
