"""Two relaybots in one Telegram group (issue 44), each a real App with python-telegram-bot
against its own fake Bot API: what one sends to the group the other receives as a bot's message
(the fakes are bridged, replies mapped between them), and each model answers mentioning the
other, as two bots told to talk would. Each lists the other in ``[access] bots``; the loop guard
(on by default) stops the exchange after its limit, with one log line, instead of 132 messages.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest

from bot.app import App
from bot.config import Config
from tests.fakes.openai_server import FakeOpenAI, TextReply
from tests.fakes.telegram_server import Call, FakeTelegram
from tests.test_bots_telegram import Trips

GROUP = -100950
ALICE = 7
BOTS = {"a": (8100000001, "relay_a_bot"), "b": (8200000002, "relay_b_bot")}


class OneOfTwo(FakeTelegram):
    """The Bot API as one of the two bots sees it: its own id and @name."""

    def __init__(self, name: str) -> None:
        super().__init__(token=f"{BOTS[name][0]}:AAFakeTokenForTests_0123456789abcdef{name}")
        self.bot_id, self.username = BOTS[name]

    async def _api_getMe(self, params: dict[str, Any]) -> dict[str, Any]:
        return await super()._api_getMe(params) | {"id": self.bot_id, "username": self.username}

    def _new_message(self, chat_id: int, params: dict[str, Any]) -> dict[str, Any]:
        msg = super()._new_message(chat_id, params)
        msg["from"] = msg["from"] | {"id": self.bot_id, "username": self.username}
        return msg


def bridge(here: OneOfTwo, there: OneOfTwo, mirrored: dict[tuple[str, int], int]) -> None:
    """What `here`'s bot sends to the group arrives in `there` as that bot's message, replying
    to the mirror of what it replied to. `mirrored[(fake, id)]` is the id of its mirror."""

    def listener(call: Call, result: Any) -> None:
        if call.method != "sendMessage" or not result or result["chat"]["id"] != GROUP:
            return
        replied = (call.params.get("reply_parameters") or {}).get("message_id")
        update = there.inject_message(
            GROUP,
            here.bot_id,
            result["text"],
            chat_type="group",
            reply_to_message=mirrored.get((here.username, int(replied))) if replied else None,
        )
        msg = update["message"]
        msg["from"] |= {"is_bot": True, "username": here.username, "first_name": here.username}
        mirrored[(there.username, msg["message_id"])] = result["message_id"]
        mirrored[(here.username, result["message_id"])] = msg["message_id"]

    here.answer_listeners.append(listener)


def each_mentions_the_other(body: dict[str, Any]) -> TextReply:
    """The model of bot a answers mentioning @relay_b_bot, and the other way round."""
    system = next(m["content"] for m in body["messages"] if m["role"] == "system")
    other = BOTS["b" if "You are A." in system else "a"][1]
    n = sum(1 for m in body["messages"] if m["role"] == "user")
    return TextReply(f"@{other} your turn ({n})")


@pytest.fixture
async def fakes() -> AsyncIterator[tuple[OneOfTwo, OneOfTwo]]:
    async with OneOfTwo("a") as a, OneOfTwo("b") as b:
        yield a, b


def config_of(
    make_config: Callable[..., Config], tmp_path: Path, me: str, tg: FakeTelegram
) -> Config:
    other = "b" if me == "a" else "a"
    return make_config(
        telegram={
            "enabled": True,
            "token": tg.token,
            "api_base_url": tg.base_url,
            "allowed_users": [str(ALICE)],
            "poll_timeout_s": 5,
        },
        access={"bots": [f"telegram:@{BOTS[other][1]}"]},  # the guard's defaults: 4/min, 3, 600s
        llm={"system_prompt": f"You are {me.upper()}."},
        storage={"path": str(tmp_path / f"{me}.db")},
    )


async def test_two_relaybots_talking_to_each_other_stop_after_the_guard_s_limit(
    make_config: Callable[..., Config], tmp_path: Path, fakes, llm: FakeOpenAI
) -> None:
    a, b = fakes
    llm.default = each_mentions_the_other
    mirrored: dict[tuple[str, int], int] = {}
    bridge(a, b, mirrored)
    bridge(b, a, mirrored)
    trips = Trips()
    logging.getLogger("engine.chat._access._bots").addHandler(trips)
    try:
        async with AsyncExitStack() as stack:
            for name, tg in (("a", a), ("b", b)):
                await stack.enter_async_context(App(config_of(make_config, tmp_path, name, tg)))
            a.inject_message(GROUP, ALICE, f"@{BOTS['a'][1]} say hello to B", chat_type="group")
            await asyncio.wait_for(trips.seen.wait(), 20)
            # A dropped B's fourth reply in a row: nothing is in flight any more.
            sent_a = [c for c in a.calls_of("sendMessage") if c.status == 200]
            sent_b = [c for c in b.calls_of("sendMessage") if c.status == 200]
            assert len(sent_a) == 4 and len(sent_b) == 4 and len(llm.requests) == 8
            # A person speaks to A: answered (a person is never held by the guard). B hears
            # A's answer as one more bot turn within the minute: its own guard trips.
            trips.seen.clear()
            a.inject_message(GROUP, ALICE, f"@{BOTS['a'][1]} still there?", chat_type="group")
            await asyncio.wait_for(trips.seen.wait(), 20)
        # Both stop while the last message crossed: the shutdown does not wait on it.
    finally:
        logging.getLogger("engine.chat._access._bots").removeHandler(trips)
    # A answered Alice and three of B's replies in a row; B answered A four times (its chain
    # of A's replies to it reached 3); B's fourth reply to A tripped A's guard.
    assert len([c for c in a.calls_of("sendMessage") if c.status == 200]) == 5
    assert len([c for c in b.calls_of("sendMessage") if c.status == 200]) == 4
    assert len(llm.requests) == 9
    tripped_a, tripped_b = trips.lines  # one line each, for the trip only
    assert "4 bot messages in a row" in tripped_a and "4 bot turns in the last minute" in tripped_b
    assert all(f"telegram:{GROUP}" in line for line in trips.lines)


async def test_both_stop_at_once_while_a_message_between_them_is_arriving(
    make_config: Callable[..., Config], tmp_path: Path, fakes, llm: FakeOpenAI
) -> None:
    """Stopping as the other bot's message arrives: a poll answered just as it is cancelled
    must still stop (Python 3.11's wait_for lost that cancellation; stop() then waited
    forever: channels/telegram/_polling.py)."""
    a, b = fakes
    llm.default = each_mentions_the_other
    mirrored: dict[tuple[str, int], int] = {}
    bridge(a, b, mirrored)
    bridge(b, a, mirrored)
    trips = Trips()
    logging.getLogger("engine.chat._access._bots").addHandler(trips)
    try:
        async with asyncio.timeout(60), AsyncExitStack() as stack:  # a hang fails here
            for name, tg in (("a", a), ("b", b)):
                await stack.enter_async_context(App(config_of(make_config, tmp_path, name, tg)))
            a.inject_message(GROUP, ALICE, f"@{BOTS['a'][1]} say hello to B", chat_type="group")
            await asyncio.wait_for(trips.seen.wait(), 20)  # A's guard: the exchange is over
            a.inject_message(GROUP, ALICE, f"@{BOTS['a'][1]} still there?", chat_type="group")
            await a.wait_for_call("sendMessage", count=5, timeout=20)
            # stopping now: A's answer is on its way to B
    finally:
        logging.getLogger("engine.chat._access._bots").removeHandler(trips)
    assert len([c for c in a.calls_of("sendMessage") if c.status == 200]) == 5
